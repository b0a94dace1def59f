"""A results.jsonl row that `raa eval reward` would score again as it stands (`evals.result_rows.damaged`: its status
and reward disagree, its reasons or notes are no list of strings) is refused by `raa eval report` naming the file,
the line and the field: an ineligible row carrying a reward of 0.7 counted toward F+ on the page while the next
`raa eval reward` threw the reward away. Tiny hand-written results, no agent, no network."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from evals.result_rows import damaged
from graph.cli import app

GOOD = {"path": "/c/a.mp4", "instruction": "push the block", "label": "failure", "pattern": "push", "task": "push",
        "preset": "full", "reward": 0.0, "status": "zero", "judge": None, "usage": {"calls": 2}}


@pytest.mark.parametrize(("edit", "shown"), [
    ({"status": "ineligible", "reward": 0.7}, "an ineligible row carries a reward (0.7)"),
    ({"status": "zero", "reward": 0.7}, "status 'zero' has reward 0.7"),
    ({"status": "done", "reward": 0.7}, "status 'done' is not one of scored, zero, ineligible"),
    ({"status": "scored", "reward": None}, "status 'scored' needs a finite number as its reward"),
    ({"notes": "looked fine"}, "field 'notes'"),
    ({"reasons": [1, 2]}, "field 'reasons'"),
])
def test_report_refuses_a_row_reward_would_score_again(tmp_path, edit, shown):
    out = tmp_path / "ev"
    out.mkdir()
    bad = {**GOOD, "path": "/c/b.mp4", **edit}
    assert damaged(bad) and not damaged(GOOD)
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [GOOD, bad]))
    res = CliRunner().invoke(app, ["eval", "report", str(out)], env={"RAA_TRACES_PATH": str(tmp_path / "traces.db")})
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert f"{out / 'results.jsonl'}:2" in text and shown in text, text
    assert not (out / "index.html").exists()


def test_report_still_writes_a_page_of_intact_rows(tmp_path):
    out = tmp_path / "ev"
    out.mkdir()
    rows = [GOOD, {**GOOD, "path": "/c/b.mp4", "status": "ineligible", "reward": None, "notes": ["gave up"]}]
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = CliRunner().invoke(app, ["eval", "report", str(out)], env={"RAA_TRACES_PATH": str(tmp_path / "traces.db")})
    assert res.exit_code == 0, res.output
    assert (out / "index.html").is_file()
