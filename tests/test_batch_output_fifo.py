"""`raa score-batch --out` naming a FIFO (or ``/dev/stdout`` piped into another program, which is one): the output is
read before scoring (`graph.batch_output.read_output`) with ``Path.read_bytes``, which waited for a writer without
limit, so the command hung with no word. It is refused as no results file, naming it, as every reader of
`tools.jsonl` refuses one (`tools.jsonl.read_bytes`)."""

from __future__ import annotations

import pytest

from graph.batch_output import read_output
from tests.fifo_files import call_unblocked, make_fifo
from tests.test_batch_resume import _batch, app, runner


def test_an_output_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    make_fifo(tmp_path / "out.jsonl")
    with pytest.raises(OSError, match=rf"not a regular file: a FIFO: '{tmp_path / 'out.jsonl'}'"):
        call_unblocked(lambda: read_output(tmp_path / "out.jsonl"), tmp_path / "out.jsonl")


def test_score_batch_names_a_fifo_output(monkeypatch, tmp_path):
    out, args = _batch(monkeypatch, tmp_path, 1)
    make_fifo(out)
    res = call_unblocked(lambda: runner.invoke(app, args), out)
    assert res.exit_code == 2, (res.output, res.exception)
    assert f"--out {out} cannot be read" in res.output and "not a regular file: a FIFO" in res.output, res.output
