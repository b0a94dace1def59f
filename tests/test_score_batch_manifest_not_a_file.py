"""`raa score-batch -m <a FIFO>` (a process substitution, `<(...)`) said "manifest not found" for a path that is there
(`is_file` is false for a FIFO), as the evals' manifest readers did before `tools.file_kinds.missing_file`; it now names
what is there, without opening it (opening a FIFO's read end releases a writer blocked on its other end into a broken
pipe), and writes nothing."""

from __future__ import annotations

import os

from graph.cli import app
from tests.cli_agent_helpers import _env, runner
from tests.fifo_files import call_unblocked, make_fifo


def test_a_fifo_manifest_is_named_as_one_and_never_opened(monkeypatch, tmp_path):
    _env(monkeypatch, tmp_path)
    fifo, out = tmp_path / "m.jsonl", tmp_path / "out.jsonl"
    make_fifo(fifo)
    real_open = os.open

    def guarded_open(path, *args, **kwargs):
        assert os.fspath(path) != str(fifo), f"{path} was opened"
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", guarded_open)
    res = call_unblocked(lambda: runner.invoke(app, ["score-batch", str(fifo), "--out", str(out)]), fifo)
    assert res.exit_code == 2, res.output
    assert f"manifest {fifo} is a FIFO, not a regular file: write the manifest to a file" in res.output, res.output
    assert "not found" not in res.output and not out.exists()


def test_a_missing_manifest_is_still_not_found(monkeypatch, tmp_path):
    _env(monkeypatch, tmp_path)
    res = runner.invoke(app, ["score-batch", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "out.jsonl")])
    assert res.exit_code == 2 and f"manifest not found: {tmp_path / 'none.jsonl'}" in res.output, res.output
