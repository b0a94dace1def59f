"""A reward that raises SystemExit or KeyboardInterrupt itself (``sys.exit`` in a library, an explicit raise) inside
the trainer's background scoring (training/reward_runner.py). asyncio lets those two out of the event loop, which
ended the loop's thread before the call's future was settled: the trainer waited on ``Future.result()`` forever,
and every later call of the run with it. Off the main thread they can only be the reward's own (a Ctrl-C reaches
the main thread), so the batch is ineligible with the reason, as for any other exception of the reward."""

from __future__ import annotations

import numpy as np
import pytest

from training.reward_runner import RewardRunner
from training.sum_reward import SumPart, SumReward

CLIPS = [np.full((2, 4, 4, 3), v, dtype=np.uint8) for v in (0, 255)]


def _exits_once(exc: BaseException):
    calls: list[int] = []

    def reward(videos, prompts, **meta):
        calls.append(1)
        if len(calls) == 1:
            raise exc
        return [0.5] * len(videos)
    return reward


def _aexits_once(exc: BaseException):
    calls: list[int] = []

    async def reward(videos, prompts, **meta):
        calls.append(1)
        if len(calls) == 1:
            raise exc
        return [0.5] * len(videos)
    return reward


def _summed(exc: BaseException):
    return SumReward([SumPart("a", 1.0, _exits_once(exc), "motion"), SumPart("b", 1.0, lambda v, p, **m: [0.25] * len(v), "motion")])


@pytest.mark.parametrize("timeout_s", [None, 30.0])
@pytest.mark.parametrize("make", [_exits_once, _aexits_once, _summed])
@pytest.mark.parametrize("exc", [SystemExit(3), KeyboardInterrupt("by hand")])
def test_a_reward_that_raises_systemexit_is_ineligible_and_the_runner_goes_on(make, exc, timeout_s):
    with RewardRunner(make(exc), "r", timeout_s=timeout_s) as runner:
        first = runner.submit(CLIPS, ["a", "b"]).result(timeout=20)  # hung forever before
        assert first.rewards == [None, None] and first.kinds == ["error", "error"]
        assert first.counts["error"] == 2
        assert type(exc).__name__ in first.reasons[0]
        second = runner.submit(CLIPS, ["a", "b"]).result(timeout=20)  # the same runner's loop still runs
        assert second.rewards == ([0.75, 0.75] if make is _summed else [0.5, 0.5])


def test_systemexit_on_the_main_thread_still_ends_the_call():
    """On the main thread ``sys.exit`` (and Ctrl-C) keep their meaning: the sync path lets them through."""
    from training.reward_outcome import call_reward

    with pytest.raises(SystemExit):
        call_reward(_exits_once(SystemExit(3)), "r", CLIPS, ["a", "b"])
