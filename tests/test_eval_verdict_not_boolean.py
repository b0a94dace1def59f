"""A judged verdict whose `reasonable` is not true or false (a hand-edited row, another tool's "partial" or "yes")
is not counted in R, and the R cell said nothing of it: "1 / 3 (33.3%)" read as a judge rejecting two outputs. The
cell, table.md, table.csv, summary.json and the index page now name such verdicts, and `raa eval reward` judges
their rows again (without scoring them again)."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from pathlib import Path

from evals.table import metrics_as_dicts, preset_metrics, render_csv, render_markdown

ROWS = [{"preset": "full", "path": f"/clips/c{i}.mp4", "label": "ordinary", "reward": 0.5, "status": "scored",
         "judge": {"status": "judged", "reasonable": verdict}}
        for i, verdict in enumerate([True, "partial", "yes", False])]


def test_r_names_the_judged_verdicts_that_are_not_true_or_false():
    m = preset_metrics("full", ROWS)
    assert (m.r, m.unjudged, m.verdict_not_boolean) == (1, 0, 2)
    cell = "1 / 4 (25.0%; 2 judged without a true/false verdict)"
    assert m.r_cell == cell
    assert f"| Full Reward Agent | {cell} |" in render_markdown([m])
    row = next(csv.DictReader(io.StringIO(render_csv([m]))))
    assert row["verdict_not_boolean"] == "2"
    assert metrics_as_dicts([m])[0]["r_cell"] == cell
    mixed = preset_metrics("full", [*ROWS, {**ROWS[0], "judge": {"status": "unjudged"}}])
    assert mixed.r_cell == "1 / 5 (20.0%; 1 unjudged; 2 judged without a true/false verdict)"


def test_index_cells_name_a_verdict_that_is_not_true_or_false(tmp_path):
    from evals.report_index import write_eval_index

    out = tmp_path / "eval"
    out.mkdir()
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    html = write_eval_index(out, traces_path=None).read_text()
    cells = html.split('id="clip-table"', 1)[1]
    assert cells.count(">not true/false<") == 2 and ">unjudged<" not in cells
    assert "1 / 4 (25.0%; 2 judged without a true/false verdict)" in html


def test_eval_reward_judges_a_verdict_that_is_not_true_or_false_again(tmp_path):
    from evals.reliability import run_reward_eval
    from tests.test_eval_reliability import FakeScorer, _clips, _judge

    clips, scorer = _clips(tmp_path)[:2], FakeScorer()
    asyncio.run(run_reward_eval(clips, ["full"], tmp_path / "ev", scorer, _judge()))
    results = tmp_path / "ev" / "results.jsonl"
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    rows[0]["judge"]["reasonable"] = "partial"  # hand-edited
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    again = asyncio.run(run_reward_eval(clips, ["full"], tmp_path / "ev", scorer, _judge()))
    assert again.scored == 0 and again.rejudged == 1 and len(scorer.calls) == 1
    assert again.metrics[0].verdict_not_boolean == 0 and again.metrics[0].r == 2
    assert Path(again.rows[0]["path"]).stem == "c1" and again.rows[0]["judge"]["reasonable"] is True
