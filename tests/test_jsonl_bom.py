"""A UTF-8 byte-order mark at the start of a JSONL file (saved by a Windows editor or PowerShell) is skipped by
every reader of the repo: read as part of the first line, that line was no JSON and its row was lost (a
`raa score-batch` resume scored the first clip again; `keep_rows` and `mend_tail` deleted it)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from graph.cli import app
from tests.test_batch_resume import _batch, _rows
from tools.jsonl import json_objects, keep_rows, mend_tail

runner = CliRunner()
BOM = b"\xef\xbb\xbf"


def test_a_resume_into_an_output_with_a_bom_skips_its_first_row(monkeypatch, tmp_path):
    out, args = _batch(monkeypatch, tmp_path, 2)
    assert runner.invoke(app, args).exit_code == 0
    out.write_bytes(BOM + out.read_bytes())
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "2 already in" in res.output, res.output
    assert sorted(r["line"] for r in _rows(out)) == [1, 2]


def test_the_jsonl_helpers_keep_a_first_row_behind_a_bom(tmp_path):
    f = tmp_path / "log.jsonl"
    f.write_bytes(BOM + b'{"a": 1}')  # one row, its newline missing: closed, not cut
    mend_tail(f)
    assert json_objects(f) == ([{"a": 1}], 0)
    f.write_bytes(BOM + b'{"a": 1}\n{"b": 2}\n')
    assert keep_rows(f, lambda row: "b" not in row) == 1
    assert [json.loads(line) for line in f.read_text(encoding="utf-8-sig").splitlines()] == [{"a": 1}]


def test_other_readers_of_jsonl_skip_a_bom(tmp_path):
    from evals.result_rows import read_results
    from training.metrics_log import rows_of

    f = tmp_path / "results.jsonl"
    f.write_bytes(BOM + json.dumps({"path": "c.mp4", "preset": "p", "iteration": 3}).encode() + b"\n")
    assert list(read_results(f)) == [("c.mp4", "p")]
    assert [r["path"] for r in rows_of(f, 3)] == ["c.mp4"]
