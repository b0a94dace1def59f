"""`--tag best` with no counted held-out mean at a complete checkpoint says why when the evaluations there are
incomplete (an outage took some rewards) or have no mean: it told the user the schedule left no evaluation at a
checkpoint (eval_every, checkpoint_every), which was not so (training/best.py `no_best_reason`)."""

from __future__ import annotations

from tests.test_best_checkpoint import _run
from training.best import best_checkpoint, no_best_reason


def test_no_best_names_the_incomplete_evaluations_at_complete_checkpoints(tmp_path):
    rows = [{"iteration": 2, "eval_reward_mean": 0.6, "eval_complete": False, "eval_outages": 2},
            {"iteration": 4, "eval_reward_mean": 0.7, "eval_complete": False, "eval_outages": 1}]
    run = _run(tmp_path, rows, [2, 4])
    assert best_checkpoint(run / "checkpoints", run / "eval.jsonl") is None
    why = no_best_reason(run / "checkpoints", run / "eval.jsonl")
    assert "iter_000002" in why and "iter_000004" in why and "outage" in why, why
    assert "multiple of checkpoint_every" not in why, why


def test_no_best_names_an_evaluation_without_a_mean(tmp_path):
    run = _run(tmp_path, [{"iteration": 2, "eval_reward_mean": None}], [2])
    why = no_best_reason(run / "checkpoints", run / "eval.jsonl")
    assert "iter_000002" in why and "no eval_reward_mean" in why, why


def test_no_best_without_an_evaluation_at_a_checkpoint_still_names_the_schedule(tmp_path):
    run = _run(tmp_path, [{"iteration": 3, "eval_reward_mean": 0.5}], [2])
    why = no_best_reason(run / "checkpoints", run / "eval.jsonl")
    assert "multiple of checkpoint_every" in why, why
