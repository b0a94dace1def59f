"""training/rewards.py build_reward: reward_options that cannot work are refused by name at start, not read
as something else (a NaN timeout, the text "no" as true, the string "0011" as a region)."""

from __future__ import annotations

import math

import pytest

from training.rewards import BrightnessReward, MotionReward, build_reward

HTTP = {"url": "http://127.0.0.1:9/score", "startup_wait_s": 0}


@pytest.mark.parametrize(("options", "message"), [
    ({"timeout_s": math.nan}, "timeout_s must be a finite number > 0, got nan"),
    ({"timeout_s": math.inf}, "timeout_s must be a finite number > 0, got inf"),
    ({"timeout_s": 0}, "timeout_s must be a finite number > 0, got 0"),
    ({"timeout_s": "600"}, "timeout_s must be a finite number > 0, got '600'"),
    ({"backoff_s": math.nan}, "backoff_s must be a finite number >= 0, got nan"),
    ({"backoff_s": math.inf}, "backoff_s must be a finite number >= 0, got inf"),
    ({"startup_wait_s": math.nan}, "startup_wait_s must be a finite number >= 0, got nan"),
    ({"startup_wait_s": -1}, "startup_wait_s must be a finite number >= 0, got -1"),
    ({"retries": 2.5}, "retries must be an integer >= 1, got 2.5"),
    ({"retries": True}, "retries must be an integer >= 1, got True"),
])
def test_http_timings_must_be_finite_numbers(options, message):
    with pytest.raises(ValueError, match=f"HttpAgentReward: {message}"):
        build_reward("http", {**HTTP, **options})


def test_http_timings_that_work_are_kept():
    fn = build_reward("http", {**HTTP, "timeout_s": 30, "backoff_s": 0, "retries": 2})
    assert (fn.timeout_s, fn.backoff_s, fn.retries, fn.startup_wait_s) == (30, 0, 2, 0)


@pytest.mark.parametrize("value", ["no", "false", 0, 1, None])
def test_skip_first_must_be_a_bool(value):
    """The text "no" is truthy: the reward skipped the first frame the option meant to keep."""
    with pytest.raises(ValueError, match=f"BrightnessReward: skip_first must be true or false, got {value!r}"):
        build_reward("brightness", {"skip_first": value})
    assert build_reward("brightness", {"skip_first": False}).skip_first is False


@pytest.mark.parametrize("region", ["0011", "0.1,0,1,1", {"x0": 0, "y0": 0, "x1": 1, "y1": 1}, [0, 0, "1", 1],
                                    [0, 0, True, 1], [0, 0, 1], 5, None])
@pytest.mark.parametrize(("name", "cls"), [("brightness", "BrightnessReward"), ("motion", "MotionReward")])
def test_region_must_be_a_list_of_four_numbers(name, cls, region):
    """ "0011" was read character by character as [0, 0, 1, 1]; a mapping failed with a bare float() error."""
    with pytest.raises(ValueError, match=rf"{cls}: region must be a list of 4 numbers \[x0, y0, x1, y1\], got "):
        build_reward(name, {"region": region})


def test_a_region_list_becomes_a_float_box():
    assert build_reward("brightness", {"region": [0, 0.5, 1, 1]}).region == (0.0, 0.5, 1.0, 1.0)
    assert MotionReward(region=(0.25, 0, 1, 1)).region == (0.25, 0.0, 1.0, 1.0)
    assert BrightnessReward().region == (0.0, 0.0, 1.0, 1.0)
