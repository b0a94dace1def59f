"""`raa eval report`'s per-clip cells showed a row an outage of the reward machinery made ineligible (an endpoint
down) exactly as the preset's own ineligible result (a refused reply, an undecodable clip): "- ineligible
skipped", though the table above leaves the one out of N and counts the other as an output the judge did not
accept. An outage row's cell now says "outage", names the fault, and says the row is not counted."""

from __future__ import annotations

import json
import re

from evals.report_index import write_eval_index

OUTAGE = [{"stage": "observe", "kind": "transport", "message": "endpoint down"}]
OWN = [{"stage": "observe", "kind": "invalid_reply", "message": "no JSON in the reply"}]


def _row(name: str, faults: list[dict]) -> dict:
    return {"path": f"/clips/{name}.mp4", "instruction": "push the block", "label": "failure", "pattern": "push",
            "preset": "full", "reward": None, "status": "ineligible", "run_id": None, "judge": {"status": "skipped"},
            "faults": faults}


def _cells(tmp_path) -> dict[str, str]:
    out = tmp_path / "eval"
    out.mkdir()
    (out / "results.jsonl").write_text("".join(json.dumps(_row(n, f)) + "\n" for n, f in (("down", OUTAGE), ("own", OWN))))
    body = re.search(r'<table id="clip-table">.*?<tbody>(.*?)</tbody>', write_eval_index(out).read_text()).group(1)
    rows = re.findall(r"<tr>(.*?)</tr>", body)
    return {re.search(r'title="/clips/(\w+)\.mp4"', r).group(1): re.findall(r"<td>(.*?)</td>", r)[-1] for r in rows}


def test_an_outage_cell_is_told_apart_from_the_presets_own_ineligible_result(tmp_path):
    cells = _cells(tmp_path)
    assert cells["own"] == '- <span class="badge ineligible">ineligible</span> <span class="muted">skipped</span>'
    assert cells["down"] != cells["own"].replace("own", "down")
    assert '<span class="badge outage"' in cells["down"] and ">outage</span>" in cells["down"]
    assert "not counted" in cells["down"]
    assert "observe: transport: endpoint down" in cells["down"]  # the fault, as a tooltip
