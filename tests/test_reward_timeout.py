"""A reward call that hangs (training/reward_runner.py ``timeout_s``, the config's ``reward_timeout_s``): its
clips end ineligible with the reason, the run goes on, and threads stuck in such calls stay bounded."""

from __future__ import annotations

import asyncio
import math
import threading

import numpy as np
import pytest

from training.config import ConfigError, PromptSpec, TrainConfig
from training.config_checks import validate
from training.reward_runner import RewardRunner

CLIPS = [np.full((3, 4, 4, 3), v, dtype=np.uint8) for v in (0, 255)]


def _sometimes_hangs(release: threading.Event, hang: list[bool]):
    def reward(videos, prompts, **meta):
        if hang.pop(0):
            release.wait(timeout=30)  # a hung sync reward (a thread nobody can stop)
        return [1.0] * len(videos)
    return reward


def test_a_hung_sync_reward_times_out_and_the_next_call_works():
    release, hang = threading.Event(), [True, False]
    try:
        with RewardRunner(_sometimes_hangs(release, hang), "slow", timeout_s=0.2) as runner:
            got = runner.submit(CLIPS, ["x"] * 2).result(timeout=10)
            assert got.rewards == [None, None] and got.kinds == ["error", "error"]
            assert got.counts["error"] == 2
            assert got.reasons == ["reward 'slow' timed out after 0.2 s"] * 2
            assert runner.submit(CLIPS, ["x"] * 2).result(timeout=10).rewards == [1.0, 1.0]
    finally:
        release.set()


def test_a_hung_async_reward_times_out_even_when_it_ignores_the_cancel():
    async def stubborn(videos, prompts, **meta):
        for _ in range(2):  # swallows the first cancel: the runner must not wait for it
            try:
                await asyncio.sleep(2)
            except asyncio.CancelledError:
                pass
        return [1.0] * len(videos)

    with RewardRunner(stubborn, "agent", timeout_s=0.2) as runner:
        got = runner.submit(CLIPS, ["x"] * 2).result(timeout=1.5)
    assert got.rewards == [None, None] and got.reasons == ["reward 'agent' timed out after 0.2 s"] * 2


def test_diverged_clips_keep_their_kind_when_the_rest_times_out():
    release = threading.Event()
    try:
        with RewardRunner(_sometimes_hangs(release, [True]), "slow", timeout_s=0.2) as runner:
            got = runner.submit(CLIPS, ["x"] * 2, unscored=["nan", None]).result(timeout=10)
        assert got.kinds == ["nan", "error"] and got.reasons[1] == "reward 'slow' timed out after 0.2 s"
    finally:
        release.set()


def test_threads_stuck_in_timed_out_calls_stay_bounded_and_refuse_more_work():
    release, started = threading.Event(), []

    def hangs(videos, prompts, **meta):
        started.append(threading.current_thread().name)
        release.wait(timeout=30)
        return [1.0] * len(videos)

    try:
        with RewardRunner(hangs, "slow", timeout_s=0.2, stuck_limit=2) as runner:
            for _ in range(2):
                assert runner.submit(CLIPS, ["x"] * 2).result(timeout=10).rewards == [None, None]
            refused = runner.submit(CLIPS, ["x"] * 2).result(timeout=10)
            assert len(started) == 2  # the third call was never started
            assert refused.rewards == [None, None] and refused.kinds == ["error", "error"]
            assert "not called: 2 reward threads are still stuck in calls that timed out" in refused.reasons[0]
            release.set()  # the stuck calls end: their threads serve the next call
            for _ in range(100):
                if not runner.stuck_threads():
                    break
                threading.Event().wait(0.05)
            assert runner.submit(CLIPS, ["x"] * 2).result(timeout=10).rewards == [1.0, 1.0]
    finally:
        release.set()


def test_no_timeout_waits_for_a_slow_reward():
    def slow(videos, prompts, **meta):
        threading.Event().wait(0.3)
        return [0.5] * len(videos)

    with RewardRunner(slow, "slow", timeout_s=None) as runner:
        assert runner.submit(CLIPS, ["x"] * 2).result(timeout=10).rewards == [0.5, 0.5]


@pytest.mark.parametrize("value", [0.0, -1.0, math.inf, math.nan])
def test_reward_timeout_must_be_positive_and_finite(value):
    cfg = TrainConfig(tiny=True, reward="brightness", dataset=[PromptSpec(text="x")], reward_timeout_s=value)
    with pytest.raises(ConfigError, match="reward_timeout_s"):
        validate(cfg)


def test_reward_timeout_none_is_no_limit_and_the_default_is_finite():
    validate(TrainConfig(tiny=True, reward="brightness", dataset=[PromptSpec(text="x")], reward_timeout_s=None))
    assert 0 < TrainConfig().reward_timeout_s < math.inf


def test_a_sums_hung_sync_part_times_out_in_the_runners_threads():
    """The sum is async (cancelled at the deadline), its hung sync part's thread is one of the runner's: counted
    as stuck (bounded), not lost in asyncio's default executor."""
    from training.sum_reward import SumPart, SumReward

    release = threading.Event()
    fn = SumReward([SumPart("hangs", 1.0, _sometimes_hangs(release, [True]), "motion"),
                    SumPart("steady", 1.0, lambda v, p, **m: [0.5] * len(v), "motion")])
    try:
        with RewardRunner(fn, "sum", timeout_s=0.2) as runner:
            got = runner.submit(CLIPS, ["x"] * 2).result(timeout=10)
            assert got.rewards == [None, None] and got.reasons == ["reward 'sum' timed out after 0.2 s"] * 2
            assert runner.stuck_threads() == 1
    finally:
        release.set()


HANGING_RUN = """
import sys
import threading
import training.rewards as rewards
from training.train import main


def reward(videos, prompts, **meta):  # iteration 1 hangs for good; iteration 2 answers
    if meta["iteration"] == 1:
        threading.Event().wait()
    return [0.25 * (i % 4) for i in range(len(videos))]


rewards.build_reward = lambda *args, **kwargs: reward
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_a_training_run_goes_on_past_a_hung_reward_and_exits(tmp_path):
    """The trainer's call site: iteration 1's reward never returns; its clips are ineligible with the reason, the
    next iteration trains, and the run exits 0 although the hung thread still runs (a daemon)."""
    import json
    import sys
    from pathlib import Path

    from tests.launches import launch

    smoke = Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml"
    out = tmp_path / "run"
    cmd = [sys.executable, "-c", HANGING_RUN, "--config", str(smoke), "--output_dir", str(out), "--progress",
           "false", "--tensorboard", "false", "--max_iterations", "2", "--num_steps", "2", "--sde_window", "[0, 1]",
           "--reward_timeout_s", "1"]
    proc = launch(cmd, timeout=600, what="training", cwd=smoke.parents[2])
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["ineligible_error"] == rows[0]["ineligible_count"] > 0 and rows[1]["ineligible_count"] == 0
    why = [json.loads(x) for x in (out / "ineligible.jsonl").read_text().splitlines()]
    assert why and all(w["reason"] == "reward 'brightness' timed out after 1 s" and w["ineligible_kind"] == "error"
                       for w in why)


def test_a_run_saved_before_the_field_had_no_limit_and_a_resume_may_change_it():
    from training.config_io import config_to_dict, saved_config_dict
    from training.config_resume import config_changes

    cfg = TrainConfig(tiny=True, reward="brightness", dataset=[PromptSpec(text="x")])
    saved = {k: v for k, v in config_to_dict(cfg).items() if k != "reward_timeout_s"}
    assert saved_config_dict(saved)["reward_timeout_s"] is None
    assert config_changes(saved, cfg) == []
    cfg.learning_rate *= 2
    assert [line.split(":")[0] for line in config_changes(saved, cfg)] == ["learning_rate"]
