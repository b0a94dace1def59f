"""A results.jsonl row whose reward is outside 0..1 (hand-edited: -0.5, 1.5) was counted by the table: F+ (reward > 0)
and P0 (reward == 0) left it out, but the label and pattern means took it in, so `raa eval report` printed a mean no
reward of the agent can make. The table refuses it as it refuses a reward that is no finite number, and `raa eval
report` names the file, the line and the value (`raa eval reward` scores such a row again, `evals.result_rows.damaged`)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from evals.table import preset_metrics
from evals.table_rows import TableRowError
from graph.cli import app

GOOD = {"path": "/c/a.mp4", "preset": "full", "label": "failure", "reward": 0.5, "status": "scored",
        "judge": {"status": "judged", "reasonable": False}, "usage": {"calls": 2}}


@pytest.mark.parametrize("reward", [-0.5, 1.5, -1e-9])
def test_the_table_refuses_a_reward_outside_0_1(reward):
    with pytest.raises(TableRowError, match=rf"full row 1 \('/c/b.mp4'\): field 'reward' .*0\.\.1.*got {reward!r}"):
        preset_metrics("full", [GOOD, {**GOOD, "path": "/c/b.mp4", "reward": reward}])


@pytest.mark.parametrize("reward", [0, 1, 1.0])
def test_the_bounds_are_rewards(reward):
    assert preset_metrics("full", [{**GOOD, "reward": reward}]).n == 1


@pytest.mark.parametrize(("field", "value", "shown"), [("reward", -0.5, "-0.5"), ("usage", {"calls": -3}, "-3")])
def test_report_names_the_file_line_and_value(tmp_path, field, value, shown):
    out = tmp_path / "ev"
    out.mkdir()
    rows = [GOOD, {**GOOD, "path": "/c/b.mp4", field: value}]
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = CliRunner().invoke(app, ["eval", "report", str(out)], env={"RAA_TRACES_PATH": str(tmp_path / "traces.db")})
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert f"{out / 'results.jsonl'}:2" in text and shown in text and f"field '{field}'" in text, text


@pytest.mark.parametrize("usage", [{"calls": -2}, {"input_tokens": 1.5}, {"attempts": -0.0001}])
def test_the_table_refuses_a_usage_count_no_run_makes(usage):
    """Usage figures count calls, images and tokens: a negative or fractional one (hand-edited) lowered the usage
    means of the table."""
    with pytest.raises(TableRowError, match=r"full row 1 \('/c/b.mp4'\): field 'usage' .*whole numbers"):
        preset_metrics("full", [GOOD, {**GOOD, "path": "/c/b.mp4", "usage": {**GOOD["usage"], **usage}}])


@pytest.mark.parametrize("usage", [{"calls": 0}, {"calls": 3, "images": 2.0}, {}])
def test_whole_usage_counts_are_counted(usage):
    assert preset_metrics("full", [{**GOOD, "usage": usage}]).n == 1


@pytest.mark.parametrize("usage", [{"calls": -2}, {"output_tokens": 0.5}])
def test_a_results_row_with_such_usage_is_scored_again(usage):
    from evals.result_rows import damaged

    assert not damaged(GOOD)
    assert damaged({**GOOD, "usage": usage})
