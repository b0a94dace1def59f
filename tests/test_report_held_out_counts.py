"""training/report.py's held-out section counts the ineligible held-out samples of each evaluation (eval.jsonl's
eval_ineligible_count of eval_videos), so an evaluation whose rewards were all ineligible does not vanish."""

from __future__ import annotations

import json
import re
from pathlib import Path

from training.report import render_training_report


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def _run(tmp_path: Path, evals: list[dict]) -> Path:
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"iteration": 1, "reward_mean": 0.5}) + "\n")
    (tmp_path / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in evals))
    return tmp_path


def test_ineligible_held_out_samples_are_counted_per_evaluation(tmp_path):
    """The held-out curve left out an evaluation whose mean was null (every reward ineligible), and no figure on
    the page said that 3 of the 4 samples behind another evaluation's mean were ineligible."""
    run = _run(tmp_path, [
        {"iteration": 0, "eval_reward_mean": 0.5, "eval_ineligible_count": 0, "eval_videos": 4},
        {"iteration": 2, "eval_reward_mean": 0.25, "eval_ineligible_count": 3, "eval_videos": 4},
        {"iteration": 4, "eval_reward_mean": None, "eval_ineligible_count": 4, "eval_videos": 4},
        {"iteration": 6, "eval_reward_mean": 0.75, "eval_ineligible_count": 0, "eval_videos": 4}])
    held_out = _text(render_training_report(run).split('id="held-out"')[1].split("</section>")[0])
    assert "ineligible held-out rewards (7 of 16)" in held_out
    assert "iteration 2: 3 of 4" in held_out and "iteration 4: 4 of 4 (no mean, not charted)" in held_out
    assert "iteration 0:" not in held_out and "iteration 6:" not in held_out


def test_no_note_when_every_held_out_reward_was_eligible(tmp_path):
    run = _run(tmp_path, [{"iteration": 0, "eval_reward_mean": 0.5, "eval_ineligible_count": 0, "eval_videos": 4},
                          {"iteration": 2, "eval_reward_mean": 0.4}])  # a row from before the counts
    assert "ineligible held-out" not in render_training_report(run)
