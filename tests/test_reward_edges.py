"""Edge cases of the reward side: malformed clips and malformed RewardBatch reasons end in explicit
ineligible results (training/verifiable_rewards.py, training/reward_outcome.py)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from training.reward_outcome import call_reward
from training.verifiable_rewards import BrightnessReward, MotionReward


@pytest.mark.parametrize("shape", [(3, 0, 4, 3), (3, 4, 0, 3)])
@pytest.mark.parametrize("reward", [BrightnessReward(), MotionReward()])
def test_frames_without_a_pixel_are_malformed_clips_not_nan_rewards(reward, shape):
    """A clip whose frames have no pixel is ineligible as a malformed clip (None, kind none); its mean was NaN
    (counted as a reward that returned NaN), and the other clip still scores."""
    ok = np.full((3, 4, 4, 3), 255, np.uint8)
    assert reward([np.zeros(shape, np.uint8), ok], ["a", "b"])[0] is None
    outcome = call_reward(reward, "verifiable", [np.zeros(shape, np.uint8), ok], ["a", "b"])
    assert outcome.rewards[0] is None and outcome.rewards[1] is not None
    assert outcome.counts["none"] == 1 and outcome.counts["nan"] == 0


def test_a_reason_given_as_text_or_none_is_kept_whole_and_stops_nothing():
    """RewardBatch reasons per item should be lists; a lone text is one reason (it was spelled out character
    by character) and None is none (it raised a TypeError that stopped the run)."""
    from training.reward_outcome import RewardBatch

    def reward(videos, prompts, **meta):
        return RewardBatch([None, None, 0.5], ["too dark", None, ("a", 1)])

    clip = np.zeros((2, 4, 4, 3), np.uint8)
    outcome = call_reward(reward, "mine", [clip] * 3, ["a"] * 3)
    assert outcome.rewards == [None, None, 0.5]
    assert outcome.reasons[0] == "reward 'mine' returned None (ineligible): too dark"
    assert outcome.reasons[1] == "reward 'mine' returned None (ineligible)"
    assert outcome.counts["none"] == 2


def test_a_one_dimensional_array_of_rewards_is_a_list_of_rewards():
    """flow_grpo-style rewards return a numpy array (float32 scores, NaN for a failed clip): a 1-D array of
    the right length reads as the list it holds; any other shape stays a RewardLengthError naming it."""
    from training.reward_outcome import RewardLengthError

    clips = [np.zeros((2, 4, 4, 3), np.uint8)] * 3
    outcome = call_reward(lambda v, p, **m: np.array([0.5, np.nan, 1.0], np.float32), "arr", clips, ["a"] * 3)
    assert outcome.rewards == [0.5, None, 1.0] and outcome.counts["nan"] == 1
    with pytest.raises(RewardLengthError, match="2-D ndarray"):
        call_reward(lambda v, p, **m: np.zeros((3, 1)), "arr", clips, ["a"] * 3)


def _cancelled_inside(videos, prompts, **meta):
    raise asyncio.CancelledError("client gave up")


async def _acancelled_inside(videos, prompts, **meta):
    await asyncio.sleep(0)
    raise asyncio.CancelledError("client gave up")


@pytest.mark.parametrize("reward", [_cancelled_inside, _acancelled_inside])
def test_a_cancelled_error_raised_inside_a_reward_makes_its_batch_ineligible(reward):
    """A CancelledError the reward raises itself (a client's own cancelled task) is that reward's exception: its
    batch is ineligible with the reason, as for any other (it got past ``except Exception`` and stopped the run).
    A cancellation of the call itself still stops it (test_reward_runner's close test)."""
    from training.reward_outcome import acall_reward
    from training.reward_runner import RewardRunner

    clips = [np.zeros((2, 4, 4, 3), np.uint8)] * 2
    outcomes = [call_reward(reward, "r", clips, ["a"] * 2), asyncio.run(acall_reward(reward, "r", clips, ["a"] * 2, {}))]
    with RewardRunner(reward, "r") as runner:
        outcomes.append(runner.submit(clips, ["a"] * 2).result(timeout=60))
    for outcome in outcomes:
        assert outcome.rewards == [None, None] and outcome.counts["error"] == 2 and outcome.kinds == ["error"] * 2
        assert outcome.reasons[0] == "reward 'r' raised CancelledError: client gave up"  # its reason kept


def test_cancelling_the_call_itself_still_stops_it():
    """The other side of the line: a task awaiting a reward that is cancelled ends cancelled, not ineligible."""
    from training.reward_outcome import acall_reward

    async def slow(videos, prompts, **meta):
        await asyncio.sleep(3600)

    async def main():
        task = asyncio.ensure_future(acall_reward(slow, "r", [np.zeros((2, 4, 4, 3), np.uint8)], ["a"], {}))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()

    asyncio.run(main())


def test_usage_given_as_one_dict_counts_and_another_type_names_the_reward():
    """A RewardBatch's usage as one dict is one record (it was iterated as its keys and dropped without a word);
    a usage of another type is a RewardLengthError naming the reward (an int stopped the run with a bare
    TypeError)."""
    from training.reward_outcome import RewardBatch, RewardLengthError

    clips = [np.zeros((2, 4, 4, 3), np.uint8)] * 2
    outcome = call_reward(lambda v, p, **m: RewardBatch([0.5, None], [[], ["dark"]], usage={"calls": 3}), "u", clips,
                          ["a"] * 2)
    assert outcome.rewards == [0.5, None] and outcome.usage == {"calls": 3}
    with pytest.raises(RewardLengthError, match="reward 'u': usage must be a list of dicts"):
        call_reward(lambda v, p, **m: RewardBatch([0.5, 0.5], [[], []], usage=7), "u", clips, ["a"] * 2)


def test_components_as_a_numpy_array_are_one_value_per_video():
    """Rewards may be a 1-D array (flow_grpo style); components given the same way stopped the run with a
    RewardLengthError saying "got ndarray of ?", though they hold one value per video."""
    from training.reward_outcome import RewardBatch

    def reward(videos, prompts, **meta):
        return RewardBatch(np.array([0.5, np.nan]), [[], []], components={"T": np.array([0.25, 0.75])})

    outcome = call_reward(reward, "arrays", [np.zeros((2, 4, 4, 3), np.uint8)] * 2, ["a", "b"])
    assert outcome.rewards == [0.5, None] and outcome.counts["nan"] == 1
    assert outcome.components == {"T": [0.25, None]}  # the ineligible item's judgment did not count


def test_a_2d_component_array_is_still_refused_naming_the_reward():
    from training.reward_outcome import RewardBatch, RewardLengthError

    def reward(videos, prompts, **meta):
        return RewardBatch([0.5, 0.5], [[], []], components={"T": np.zeros((2, 2))})

    with pytest.raises(RewardLengthError, match=r"reward 'arrays': component 'T'.*2-D"):
        call_reward(reward, "arrays", [np.zeros((2, 4, 4, 3), np.uint8)] * 2, ["a", "b"])


def test_a_batch_without_a_reward_list_is_an_error_naming_the_reward():
    """RewardBatch(rewards=None) raised "TypeError: object of type 'NoneType' has no len()" naming no reward;
    it is a RewardLengthError naming it, as a plain None return is."""
    from training.reward_outcome import RewardBatch, RewardLengthError

    with pytest.raises(RewardLengthError, match=r"reward 'broken'.*rewards.*NoneType"):
        call_reward(lambda v, p, **m: RewardBatch(None, [[], []]), "broken", [np.zeros((2, 4, 4, 3), np.uint8)] * 2,
                    ["a", "b"])


def test_a_batch_whose_reasons_are_none_has_no_reasons():
    """reasons=None for the whole batch (an item's None already meant "no reasons") raised a TypeError naming no
    reward; the rewards are kept and the ineligible item still says which reward returned None."""
    from training.reward_outcome import RewardBatch

    outcome = call_reward(lambda v, p, **m: RewardBatch([0.5, None], None), "plain",
                          [np.zeros((2, 4, 4, 3), np.uint8)] * 2, ["a", "b"])
    assert outcome.rewards == [0.5, None] and outcome.counts["none"] == 1
    assert outcome.reasons == [None, "reward 'plain' returned None (ineligible)"]


@pytest.mark.parametrize("reward", [BrightnessReward, MotionReward])
@pytest.mark.parametrize("edge", [1.0 - 1e-12, 1.0 - 5e-12])
def test_a_region_starting_a_rounding_error_before_the_far_edge_crops_one_pixel(reward, edge):
    """A box starting within 1e-9/size of 1.0 took its start pixel one past the last (an empty crop, a NaN
    reward); it crops the last row/column instead, as the box's "at least one pixel" promises."""
    rng = np.random.default_rng(0)
    clip = rng.integers(0, 256, (3, 4, 5, 3), dtype=np.uint8)
    for region in ([edge, 0.0, 1.0, 1.0], [0.0, edge, 1.0, 1.0]):
        value = reward(region=region)([clip], ["a"])[0]
        assert value is not None and np.isfinite(value), region
    col = BrightnessReward(region=[edge, 0.0, 1.0, 1.0], skip_first=False)([clip], ["a"])[0]
    assert col == pytest.approx(clip[:, :, -1].mean() / 255.0)
