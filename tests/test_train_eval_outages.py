"""A held-out evaluation that an outage hit is incomplete: it is reported, never chosen as the best checkpoint
and never counted by ``eval_patience`` (training/evaluate.py, training/best.py).

An evaluation whose reward service was down for part of its samples averaged the survivors only, and that mean,
over an accidental subset of the held-out prompts, could be chosen as "best" (exported by ``--tag best``, kept by
pruning) or reset or run out ``eval_patience``. Ineligible rewards of kind ``error`` the reward gave are outages;
the stand-ins of a held-out prompt whose image cannot be read (kind ``error`` too) are not: that prompt is gone
from every later evaluation as well, and a rerun would not bring it back.
"""

from __future__ import annotations

import json

from tests.test_best_checkpoint import _run
from training.best import best_checkpoint, counted_mean, eval_means, evals_since_best, passed_over
from training.evaluate import summarize_eval
from training.report_notes import ineligible_note


def _item(reward, kind=None, **extra):
    return {"prompt": 0, "sample": 0, "text": "t", "video": None, "reward": reward, "reason": None, "run_id": None,
            **({"ineligible_kind": kind} if kind else {}), **extra}


def _part(items):
    return {"rewards": [it["reward"] for it in items], "seconds": 1.0, "items": items, "components": {}}


def test_an_evaluation_with_an_outage_is_incomplete_and_counts_it_apart_from_unreadable_prompts():
    row = summarize_eval(4, [_part([_item(0.5), _item(None, "error"), _item(None, "none")]),
                             _part([_item(0.7), _item(None, "error", stand_in=True)])])
    assert row["eval_ineligible_error"] == 2 and row["eval_outages"] == 1 and row["eval_complete"] is False
    assert row["eval_reward_mean"] == 0.6  # still reported: what the survivors scored
    clean = summarize_eval(4, [_part([_item(0.5), _item(None, "none"), _item(None, "error", stand_in=True)])])
    assert clean["eval_outages"] == 0 and clean["eval_complete"] is True


def test_an_incomplete_evaluation_is_never_the_best_checkpoint(tmp_path):
    rows = [{"iteration": 0, "eval_reward_mean": 0.3}, {"iteration": 2, "eval_reward_mean": 0.9,
                                                          "eval_outages": 3, "eval_complete": False},
            {"iteration": 4, "eval_reward_mean": 0.5, "eval_outages": 0, "eval_complete": True}]
    run = _run(tmp_path, rows, [2, 4])
    assert eval_means(run / "eval.jsonl") == {0: 0.3, 4: 0.5}
    found = best_checkpoint(run / "checkpoints", run / "eval.jsonl")
    assert found is not None and found[1] == 4
    notes = passed_over(run / "checkpoints", run / "eval.jsonl", found)
    assert any("iteration 2" in n and "outage" in n and "0.9" in n for n in notes), notes
    assert not any("every held-out reward ineligible" in n for n in notes), notes


def test_an_incomplete_evaluation_counts_neither_way_for_patience(tmp_path):
    rows = [{"iteration": 0, "eval_reward_mean": 0.5}, {"iteration": 2, "eval_reward_mean": 0.1,
                                                          "eval_complete": False, "eval_outages": 1},
            {"iteration": 4, "eval_reward_mean": 0.9, "eval_complete": False, "eval_outages": 2},
            {"iteration": 6, "eval_reward_mean": 0.4, "eval_complete": True, "eval_outages": 0}]
    run = _run(tmp_path, rows, [])
    assert evals_since_best(eval_means(run / "eval.jsonl")) == 1  # only iteration 6 failed to beat 0.5


def test_the_trainer_and_the_readers_agree_on_which_mean_counts():
    assert counted_mean({"eval_reward_mean": 0.4}) == 0.4  # a row from before the field: complete
    assert counted_mean({"eval_reward_mean": 0.4, "eval_complete": True}) == 0.4
    assert counted_mean({"eval_reward_mean": 0.4, "eval_complete": False}) is None
    assert counted_mean({"eval_reward_mean": float("nan")}) is None and counted_mean({"eval_reward_mean": None}) is None


def test_the_report_names_an_incomplete_evaluation():
    rows = [{"iteration": 2, "eval_reward_mean": 0.9, "eval_ineligible_count": 3, "eval_videos": 8,
             "eval_outages": 3, "eval_complete": False}]
    note = ineligible_note(rows)
    assert "iteration 2: 3 of 8" in note and "outage" in note, note
    assert json.dumps(rows)  # plain JSON rows, as eval.jsonl holds them
