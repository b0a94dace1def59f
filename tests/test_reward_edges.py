"""Edge cases of the reward side: malformed clips and malformed RewardBatch reasons end in explicit
ineligible results (training/verifiable_rewards.py, training/reward_outcome.py)."""

from __future__ import annotations

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
