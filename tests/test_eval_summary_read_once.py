"""`raa eval report` reads an evaluation folder's summary.json once (`evals.report_index.read_summary`): its scope
and the note of a newer run that has not finished both come from that one object. It was read twice (for the scope,
then again for the note, by two readers since removed), each read with its own error handling, and two reads may see
two files."""

from __future__ import annotations

import json

import evals.eval_runs
import evals.report_index
from evals.eval_runs import STARTED, SUMMARY
from evals.report_index import write_eval_index


def test_summary_json_is_read_once_by_the_report(tmp_path, monkeypatch):
    row = {"path": "/a.mp4", "preset": "full", "label": "failure", "reward": 0.9, "status": "scored"}
    (tmp_path / "results.jsonl").write_text(json.dumps(row) + "\n")
    (tmp_path / SUMMARY).write_text(json.dumps({"run": "r1", "manifest": "/m.jsonl", "paths": ["/a.mp4"],
                                                "presets": ["full"], "finished": "2026-01-01T00:01:00+00:00"}))
    (tmp_path / STARTED).write_text(json.dumps({"run": "r2", "manifest": "/m.jsonl", "presets": ["full"],
                                                "clips": 1, "started": "2026-01-02T00:00:00+00:00"}))
    reads = []
    for module in (evals.report_index, evals.eval_runs):
        real = module.parsed_file

        def counting(path, real=real):
            reads.append(path.name)
            return real(path)

        monkeypatch.setattr(module, "parsed_file", counting)
    warnings = []
    write_eval_index(tmp_path, traces_path=tmp_path / "none.sqlite", on_unfinished=warnings.append)
    assert reads.count(SUMMARY) == 1, reads
    assert len(warnings) == 1 and "started 2026-01-02T00:00:00+00:00" in warnings[0], warnings
