"""`raa eval report` takes results.jsonl from one look at it (`evals.result_rows.results_found`): it asked whether the
file was there (a stat), then read it by name (another stat and an open). Removed in between (a rerun moving the
folder, a hand clean-up), the page came out empty, though its header read as if the run had found no row; a removed
results.jsonl says "no evaluation results", a file found is read whole."""

from __future__ import annotations

import json

from evals.report_index import write_eval_index
from tests.path_calls import removed_after_first_look


def test_results_removed_after_the_reports_first_look_are_read_whole_or_not_found(tmp_path, monkeypatch):
    out = tmp_path / "ev"
    out.mkdir()
    row = {"path": str(tmp_path / "a.mp4"), "preset": "full", "instruction": "push it", "label": "failure",
           "pattern": "success", "reward": 0.25, "status": "scored", "run_id": "", "judge": None}
    results = out / "results.jsonl"
    results.write_text(json.dumps(row) + "\n")
    seen = removed_after_first_look(monkeypatch, results)
    try:
        page = write_eval_index(out, traces_path=None).read_text()
    except FileNotFoundError as exc:  # the first look found nothing: said so
        assert str(exc) == f"no evaluation results in {out} (expected {results})"
    else:  # the first look found the file: the page is its rows
        assert seen and "a.mp4" in page and "0.250" in page, seen
    assert not results.exists()
