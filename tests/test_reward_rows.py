"""training.rollout_log.reward_items: the rewards.jsonl row of an ineligible rollout says why (its reason and
ineligible kind), so the file alone explains a null reward; an eligible row has neither field."""

from __future__ import annotations

import pytest
import torch

from training.reward_outcome import RewardOutcome
from training.rollout_log import reward_items


def _rows(outcome: RewardOutcome, diverged=(None, None, None)) -> list[dict]:
    n = len(outcome.rewards)
    return reward_items(outcome, ["push"] * n, [0] * n, n, 0, torch.zeros(n), torch.tensor([True] * n), None,
                        list(diverged))


def test_an_ineligible_rollouts_row_carries_its_reason_and_kind():
    """rewards.jsonl rows of ineligible rollouts had reward null and nothing else: the reason lived only in
    ineligible.jsonl, keyed by iteration and prompt, which several rollouts of one group share."""
    outcome = RewardOutcome([0.5, None, None], [None, "http reward failed (http://svc/v1/score): ReadError: reset",
                                                "agent: no decodable frames"],
                            {"none": 1, "nan": 0, "inf": 0, "error": 1}, ["run-1", None, "run-3"],
                            kinds=[None, "error", "none"])
    rows = _rows(outcome)
    assert "reason" not in rows[0] and "ineligible_kind" not in rows[0] and rows[0]["reward"] == 0.5
    assert (rows[1]["reward"], rows[1]["reason"], rows[1]["ineligible_kind"]) == (
        None, "http reward failed (http://svc/v1/score): ReadError: reset", "error")
    assert (rows[2]["reason"], rows[2]["ineligible_kind"], rows[2]["run_id"]) == (
        "agent: no decodable frames", "none", "run-3")


def test_an_ineligible_row_without_a_recorded_reason_or_kind_still_says_so():
    """An outcome made by hand has no kinds, and a reason may be missing: the row says "ineligible", never
    nothing, and its kind is null (unknown), as ineligible.jsonl says "ineligible" for it."""
    outcome = RewardOutcome([None, 1.0, 0.0], [None, None, None], {"none": 1, "nan": 0, "inf": 0, "error": 0},
                            [None, None, None])
    rows = _rows(outcome)
    assert (rows[0]["reason"], rows[0]["ineligible_kind"]) == ("ineligible", None)
    assert all("reason" not in r for r in rows[1:])


def test_an_outcome_without_run_ids_gives_rows_with_a_null_run_id():
    """An outcome made by hand leaves `run_ids` empty (unknown, like `kinds`): reward_items raised IndexError."""
    outcome = RewardOutcome([0.5, None, 1.0], [None, "no frames", None], {"none": 1, "nan": 0, "inf": 0, "error": 0})
    rows = _rows(outcome)
    assert [r["run_id"] for r in rows] == [None, None, None] and rows[1]["reason"] == "no frames"


def test_run_ids_of_another_length_are_refused_by_name():
    with pytest.raises(ValueError, match="1 run ids for 3 rewards"):
        RewardOutcome([0.5, None, 1.0], [None, None, None], {}, ["run-1"])


def test_kinds_of_another_length_are_refused_where_the_outcome_is_built():
    """A short `kinds` was read as unknown past its end (ineligible_kind null for item 2, kind "error" for
    item 1), where `run_ids` of the wrong length was refused: both now fail where the outcome is made."""
    with pytest.raises(ValueError, match="2 kinds for 3 rewards"):
        RewardOutcome([0.5, None, None], [None, "x", "y"], {}, kinds=[None, "error"])


@pytest.mark.parametrize(("fields", "message"), [
    ({"reasons": [None, None]}, "2 reasons for 3 rewards"),
    ({"reasons": [], "run_ids": []}, "0 reasons for 3 rewards"),
    ({"components": {"T": [1.0, 0.0]}}, "component 'T' has 2 values for 3 rewards"),
])
def test_every_per_item_list_must_match_the_rewards(fields, message):
    """reasons has no "unknown" meaning (every item has a slot, None when eligible) and a component is one
    value per item: a list of another length is refused by name, never read past its end or cut short."""
    with pytest.raises(ValueError, match=message):
        RewardOutcome([0.5, None, 1.0], **({"reasons": [None, "x", None]} | fields))


def test_empty_kinds_and_run_ids_still_mean_unknown():
    outcome = RewardOutcome([None, 1.0, 0.0], ["x", None, None], {}, [], kinds=[])
    rows = _rows(outcome)
    assert (rows[0]["ineligible_kind"], rows[0]["run_id"]) == (None, None)


def test_ineligible_jsonl_rows_carry_their_kind_too(tmp_path):
    """ineligible.jsonl had iteration, prompt and reason only: whether a null reward was an outage (``error``),
    a diverged rollout (``nan`` / ``inf``) or the agent's verdict on the clip (``none``) was in rewards.jsonl
    alone, which is written only with the rollout rows; each line now says its ``ineligible_kind``."""
    import json

    from training.metrics_log import MetricsLog
    from training.rollout_log import ineligible_items

    outcome = RewardOutcome([0.5, None, None], [None, "reward 'agent' failed: ReadError", None],
                            {"none": 1, "nan": 0, "inf": 0, "error": 1}, [None, None, None],
                            kinds=[None, "error", "none"])
    items = ineligible_items(outcome, ["a", "b", "c"])
    assert items == [{"prompt": "b", "reason": "reward 'agent' failed: ReadError", "ineligible_kind": "error"},
                     {"prompt": "c", "reason": "ineligible", "ineligible_kind": "none"}]
    log = MetricsLog(tmp_path, enabled=True, tensorboard=False, append=False)
    log.write_ineligible(3, items)
    log.close()
    rows = [json.loads(x) for x in (tmp_path / "ineligible.jsonl").read_text().splitlines()]
    assert rows == [{"iteration": 3, **item} for item in items]
