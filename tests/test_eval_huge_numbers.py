"""A whole number too large for a float in a row (a hand edit's reward 10**400, which Python's json reads as an int):
`math.isfinite` raised OverflowError on it, a traceback out of `raa eval compare`, `raa eval draws` and the table's
row checks, where such a row must be refused naming its line (it is no reward in 0..1)."""

from __future__ import annotations

import json

import pytest

from evals.batch_rows import checked_reward, eligible_reward
from evals.compare import compare
from evals.draws import summarize_draws
from evals.result_rows import check_result_row
from evals.table_rows import TableRowError, check_row, finite, usage_counts
from tests.test_eval_compare import _scores

HUGE = 10**400


def test_finite_takes_a_huge_whole_number_without_overflow():
    assert finite(HUGE) and finite(-HUGE) and not finite(float("inf")) and not finite(True)
    assert usage_counts({"calls": 10**300}) and not usage_counts({"calls": -HUGE})
    assert not usage_counts({"calls": HUGE})  # no float holds it: the usage means' float() overflowed


def test_a_huge_reward_is_refused_with_its_line_not_a_traceback():
    with pytest.raises(TableRowError, match=r"x:3: reward 10+ is outside 0\.\.1"):
        checked_reward({"status": "scored", "reward": HUGE}, "x:3", TableRowError)
    with pytest.raises(TableRowError, match=r"x:3: field 'reward' must be in 0\.\.1"):
        check_row({"reward": HUGE}, "x:3")
    with pytest.raises(TableRowError, match=r"x:3: field 'usage' must be an object of whole numbers"):
        check_result_row({"reward": None, "status": "ineligible", "usage": {"calls": -HUGE}}, "x:3")
    assert eligible_reward({"status": "scored", "reward": HUGE}) is None  # no float holds it: no reward


def _with_huge(tmp_path, name):
    good = _scores(tmp_path, name, {"k1": 0.5, "k2": 0.4})
    rows = [json.loads(line) for line in good.read_text().splitlines()]
    rows[1]["result"]["reward"] = HUGE
    good.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return good


def test_compare_and_draws_skip_a_huge_reward_naming_its_line(tmp_path):
    odd, good = _with_huge(tmp_path, "odd"), _scores(tmp_path, "good", {"k1": 0.5, "k2": 0.4})
    c = compare(odd, good)
    assert [s.line for s in c.a.skipped_lines] == [f"{odd}:2"] and "outside 0..1" in c.a.skipped_lines[0].reason
    assert (c.a.rows, c.n) == (1, 1)
    s = summarize_draws(odd)
    assert [x.line for x in s.skipped_lines] == [f"{odd}:2"] and s.rows == 1


def test_a_huge_usage_count_is_refused_naming_its_line_not_an_overflow(tmp_path):
    """A usage figure no float holds passed `usage_counts` (every int is finite), then the usage means' float()
    overflowed: `raa eval report` ended in OverflowError, and `raa eval reward` kept the row (not `damaged`), so
    every rerun's table did too. It is refused as a usage of whole numbers, its row scored again."""
    from typer.testing import CliRunner

    from evals.result_rows import damaged
    from graph.cli import app

    row = {"path": "/c/a.mp4", "preset": "full", "label": "failure", "reward": 0.5, "status": "scored",
           "judge": {"status": "judged", "reasonable": False}, "usage": {"calls": HUGE}}
    assert damaged(row) and not damaged({**row, "usage": {"calls": 10**300}})
    out = tmp_path / "ev"
    out.mkdir()
    (out / "results.jsonl").write_text(json.dumps(row) + "\n")
    res = CliRunner().invoke(app, ["eval", "report", str(out)], env={"RAA_TRACES_PATH": str(tmp_path / "t.db")})
    text = " ".join(res.output.split())
    assert res.exit_code == 2 and f"{out / 'results.jsonl'}:1: field 'usage' must be" in text, (text, res.exception)
