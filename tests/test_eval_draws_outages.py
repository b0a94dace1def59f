"""`raa eval draws` counted every draw without a reward as one "ineligible row left out", whether the reward
machinery failed on it (an endpoint down: `--retry-ineligible` fills it) or the agent's own sampled run made it
ineligible (a reply it could not use at temperature > 0: a draw-to-draw variation of its own). The summary now
counts the outages apart (`outage_rows`, `graph.schemas.Fault.outage`)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from evals.draws import summarize_draws
from graph.cli import app

OUTAGE = {"stage": "observe", "kind": "timeout", "message": "no reply in 120 s"}
OWN = {"stage": "observe", "kind": "invalid_reply", "message": "no JSON"}


def _row(clip: str, draw: int, reward: float | None, fault: dict | None = None) -> dict:
    result = ({"status": "ineligible", "reward": None, "reasons": ["x"], "faults": [fault] if fault else []}
              if reward is None else {"status": "scored", "reward": reward, "reasons": [], "faults": []})
    return {"path": f"/v/{clip}.mp4", "instruction": "stack", "preset": "full", "draw": draw, "result": result}


def test_outage_draws_are_counted_apart(tmp_path):
    rows = [_row("a", 0, 0.2), _row("a", 1, 0.4), _row("a", 2, None, OUTAGE),
            _row("b", 0, 0.6), _row("b", 1, None, OWN), _row("b", 2, 0.8), _row("c", 0, None)]
    path = tmp_path / "scores.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = summarize_draws(path)
    assert (s.ineligible_rows, s.outage_rows) == (3, 1)  # c's row recorded no faults: no known outage
    res = CliRunner().invoke(app, ["eval", "draws", str(path)], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "3 ineligible rows left out (1 for an outage of the reward machinery" in res.output
    assert s.outage_draws == [2]


def test_the_outage_rows_are_said_with_the_command_that_fills_them(tmp_path):
    """`raa eval compare` named `score-batch --retry-ineligible` beside its outage pairs; `raa eval draws` counted
    its outage rows without it, and a draw's rows are retried only by the run of that draw (`--draw K`)."""
    rows = [_row("a", 0, 0.2), _row("a", 1, None, OUTAGE), _row("a", 3, None, OUTAGE),
            _row("b", 0, 0.6), _row("b", 1, 0.4), _row("b", 3, None, OUTAGE)]
    path = tmp_path / "scores.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = CliRunner().invoke(app, ["eval", "draws", str(path)], terminal_width=300)
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "3 ineligible rows left out (3 for an outage of the reward machinery)" in text, text
    assert (f"raa score-batch MANIFEST --out {path} --preset full --draw 1 --retry-ineligible "
            f"raa score-batch MANIFEST --out {path} --preset full --draw 3 --retry-ineligible") in text, text


def test_outage_rows_of_draw_0_alone_are_said_with_a_plain_retry(tmp_path):
    """Outage rows only in draw 0: `raa eval draws` said "--draw K fills them, K = 0" where `raa eval compare` says a
    command without --draw (draw 0 is score-batch's default); both now say that one."""
    rows = [_row("a", 0, None, OUTAGE), _row("a", 1, 0.4), _row("a", 2, 0.5),
            _row("b", 0, None, OUTAGE), _row("b", 1, 0.6), _row("b", 2, 0.8)]
    path = tmp_path / "scores.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = CliRunner().invoke(app, ["eval", "draws", str(path)], terminal_width=300)
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert f"raa score-batch MANIFEST --out {path} --preset full --retry-ineligible" in text, text
    assert "--draw 0" not in text


def test_an_outage_draw_is_told_apart_in_the_rewards_by_draw(tmp_path):
    """The "Rewards by draw" column showed a draw an outage took as "⊥", as the agent's own ineligible draw, though
    `--retry-ineligible` fills only the first (the report reads such a cell "outage"); it reads "⊥(outage)", and the
    JSON names those draws (``outage_draws``)."""
    rows = [_row("a", 0, 0.2), _row("a", 1, None, OUTAGE), _row("a", 2, None, OWN), _row("a", 3, 0.9)]
    path = tmp_path / "scores.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    widest = summarize_draws(path).most_variable[0]
    assert (widest["ineligible_draws"], widest["outage_draws"]) == ([1, 2], [1])
    res = CliRunner().invoke(app, ["eval", "draws", str(path)], terminal_width=300)
    assert res.exit_code == 0, res.output
    assert "0.200 ⊥(outage) ⊥ 0.900" in res.output, res.output
