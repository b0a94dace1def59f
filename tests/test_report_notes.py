"""The training report's notes (training/report_notes.py): the ineligible held-out samples of each evaluation
(eval.jsonl's eval_ineligible_count of eval_videos), so an evaluation whose rewards were all ineligible does not
vanish, and the saves killed part-way among the header's checkpoints."""

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


def test_the_header_marks_a_save_killed_part_way(tmp_path):
    """The header listed every iter_* folder as a checkpoint, a save killed part-way (no layout.json, after a
    finished one) too: the run looked checkpointed at an iteration nothing can resume or export."""
    from training.engine import mark_latest
    from training.resume import StateLayout, write_layout

    run = _run(tmp_path, [{"iteration": 0, "eval_reward_mean": 0.5}])
    for it in (2, 4):
        (run / "checkpoints" / f"iter_{it:06d}").mkdir(parents=True)
    write_layout(run / "checkpoints" / "iter_000002", StateLayout(2, "float32"))
    mark_latest(run / "checkpoints", 2)
    header = _text(render_training_report(run).split('id="run-header"')[1].split("</section>")[0])
    assert "checkpoints iter_000002, iter_000004 (unfinished save: no layout.json)" in header
