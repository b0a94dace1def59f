"""Rewards scored in the background (training/reward_runner.py) and the trainer's `reward_overlap`."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from concurrent.futures import CancelledError
from pathlib import Path

import numpy as np
import pytest

from tests.graph_scripts import textured_frames
from tests.launches import run_to_end
from training.reward_runner import RewardRunner, merge_outcomes
from training.rewards import RewardBatch, RewardLengthError, RewardOutcome, call_reward

ROOT = Path(__file__).resolve().parents[1]
CLIPS = [np.full((3, 4, 4, 3), v, dtype=np.uint8) for v in (0, 128, 255)]


def _mean(videos, prompts, **meta):
    return [float(v.mean()) / 255 for v in videos]


def test_same_outcome_as_call_reward():
    def mixed(videos, prompts, **meta):
        return RewardBatch([None, float("nan"), 0.5], [["tool failed"], [], []], ["a", None, "c"])

    with RewardRunner(mixed, "mixed") as runner:
        got = runner.submit(CLIPS, ["x"] * 3).result(timeout=30)
    assert got == call_reward(mixed, "mixed", CLIPS, ["x"] * 3)
    assert got.rewards == [None, None, 0.5] and got.counts == {"none": 1, "nan": 1, "inf": 0, "error": 0}
    assert got.reasons[0] == "reward 'mixed' returned None (ineligible): tool failed" and got.run_ids == ["a", None, "c"]


def test_a_sync_reward_runs_in_the_background():
    """submit returns at once: the reward waits for an event the caller sets afterwards."""
    go = threading.Event()

    def blocking(videos, prompts, **meta):
        assert go.wait(timeout=30), "the caller was blocked by submit"
        return _mean(videos, prompts)

    with RewardRunner(blocking, "blocking") as runner:
        future = runner.submit(CLIPS, ["x"] * 3)
        assert not future.done()
        go.set()
        assert future.result(timeout=30).rewards == [0.0, 128 / 255, 1.0]


def test_async_calls_overlap_on_one_event_loop():
    """Group 1's call can only finish once group 2's call has started: both run at the same time, on the
    runner's single loop (the agent's pools and trace database see one loop)."""
    loops, started = [], {}

    async def handshake(videos, prompts, **meta):
        me, other = meta["group_ids"][0], 1 - meta["group_ids"][0]
        loops.append(asyncio.get_running_loop())
        started.setdefault(me, asyncio.Event()).set()
        await asyncio.wait_for(started.setdefault(other, asyncio.Event()).wait(), timeout=30)
        return [float(me)] * len(videos)

    with RewardRunner(handshake, "handshake") as runner:
        first = runner.submit(CLIPS[:2], ["a"] * 2, group_ids=[0, 0])
        second = runner.submit(CLIPS[2:], ["b"], group_ids=[1])
        merged = merge_outcomes([first.result(timeout=60), second.result(timeout=60)])
    assert merged.rewards == [0.0, 0.0, 1.0] and loops[0] is loops[1]


def test_failures_keep_call_reward_semantics():
    def boom(videos, prompts, **meta):
        raise RuntimeError("service down")

    with RewardRunner(boom, "boom") as runner:
        out = runner.submit(CLIPS, ["x"] * 3).result(timeout=30)
        assert out.rewards == [None] * 3 and out.counts["error"] == 3
        assert out.reasons[0] == "reward 'boom' raised RuntimeError: service down"
    with RewardRunner(lambda v, p, **m: [1.0], "short") as runner:
        with pytest.raises(RewardLengthError, match="returned 1 values for 3 videos"):
            runner.submit(CLIPS, ["x"] * 3).result(timeout=30)
        with pytest.raises(ValueError, match="3 videos but 2 prompts"):
            runner.submit(CLIPS, ["x"] * 2)

    def short_inside(videos, prompts, **meta):  # a reward that itself checks a part (reward: sum) and finds it short
        raise RewardLengthError("reward 'part' returned 1 values for 3 videos")

    with RewardRunner(short_inside, "sum") as runner:  # an error, not three ineligible rewards
        with pytest.raises(RewardLengthError, match="reward 'part' returned 1 values"):
            runner.submit(CLIPS, ["x"] * 3).result(timeout=30)


def test_acall_reward_refuses_videos_and_prompts_that_do_not_pair_like_call_reward():
    from training.reward_outcome import acall_reward

    called = []

    def reward(videos, prompts, **meta):
        called.append(len(videos))
        return [0.5] * len(videos)

    with pytest.raises(ValueError, match="reward 'r': 3 videos but 2 prompts"):
        call_reward(reward, "r", CLIPS, ["x"] * 2)
    with pytest.raises(ValueError, match="reward 'r': 3 videos but 2 prompts"):
        asyncio.run(acall_reward(reward, "r", CLIPS, ["x"] * 2, {}))
    assert called == []  # refused before the reward ran: no prompt was scored against another's video
    assert asyncio.run(acall_reward(reward, "r", CLIPS, ["x"] * 3, {})).rewards == [0.5] * 3


def test_close_cancels_what_is_running_and_refuses_more():
    running = threading.Event()

    async def forever(videos, prompts, **meta):
        running.set()
        await asyncio.sleep(3600)

    runner = RewardRunner(forever, "forever")
    future = runner.submit(CLIPS, ["x"] * 3)
    assert running.wait(timeout=30)
    runner.close()
    runner.close()  # idempotent
    with pytest.raises(CancelledError):
        future.result(timeout=30)
    with pytest.raises(RuntimeError, match="closed"):
        runner.submit(CLIPS, ["x"] * 3)


def test_merge_outcomes_keeps_order_and_sums_counts():
    a = RewardOutcome([1.0, None], [None, "x"], {"none": 1, "error": 0}, ["r1", None])
    b = RewardOutcome([None], ["y"], {"none": 0, "error": 1})  # no run ids
    m = merge_outcomes([a, b])
    assert m.rewards == [1.0, None, None] and m.reasons == [None, "x", "y"]
    assert m.counts == {"none": 1, "error": 1} and m.run_ids == ["r1", None, None]
    assert m.kinds == []  # hand-made outcomes without kinds: unknown
    k = merge_outcomes([RewardOutcome([1.0, None], [None, "x"], kinds=[None, "nan"]),
                        RewardOutcome([None], ["y"], kinds=["error"])])
    assert k.kinds == [None, "nan", "error"]
    c = merge_outcomes([RewardOutcome([0.5], [None], {}, [None], {"T": [1.0]}), b,
                        RewardOutcome([0.2], [None], {}, [None], {"T": [0.0], "V": [0.5]})]).components
    assert c == {"T": [1.0, None, 0.0], "V": [None, None, 0.5]}  # a part without a component: None there
    assert merge_outcomes([RewardOutcome([0.5], [None], usage={"calls": 2}), b,
                           RewardOutcome([0.2], [None], usage={"calls": 3, "images": 4})]).usage == {"calls": 5, "images": 4}


def test_agent_reward_groups_keep_their_own_clips(tmp_path):
    """Two groups of one iteration scored by separate calls (first_index 0 and 2) keep four distinct clips,
    each named by its position in the rank's batch, as one call for the batch named them."""
    from graph.settings import BackboneSettings
    from graph.testing import ScriptedChatModel
    from graph.tracing import open_saver, read_trace
    from tests.graph_scripts import full_script
    from training.rewards import AgentReward

    traces = tmp_path / "traces.sqlite"
    settings = BackboneSettings(inspect_mode="plan", cache_path=None, traces_path=str(traces))
    fn = AgentReward(preset="decomposed", video_dir=str(tmp_path / "clips"), videos="keep",
                     model=ScriptedChatModel(full_script()), settings=settings)
    rng = np.random.default_rng(0)
    clips = [textured_frames(rng) for _ in range(4)]
    with RewardRunner(fn, "agent") as runner:
        parts = [runner.submit(clips[2 * g:2 * g + 2], ["pick the cup"] * 2, fps=8.0, iteration=3, rank=0,
                               group_ids=[g, g], first_index=2 * g) for g in range(2)]
        out = merge_outcomes([p.result(timeout=120) for p in parts])
    assert all(r is not None for r in out.rewards) and len(set(out.run_ids)) == 4
    for i, run_id in enumerate(out.run_ids):
        video = read_trace(open_saver(traces), run_id).values["video"]
        assert video == str((tmp_path / "clips" / "it000003" / f"r0_{i:04d}.mp4").resolve())
    assert len(list((tmp_path / "clips" / "it000003").iterdir())) == 4


def test_agent_reward_max_concurrency_bounds_every_group_in_flight(tmp_path, monkeypatch):
    """With reward_overlap: groups each group is its own batch scored in the background; each had its own
    bound, so 4 groups of 4 with max_concurrency 4 ran 16 agent runs at once against the backbone."""
    import graph.api as api
    from graph.settings import BackboneSettings
    from graph.testing import ScriptedChatModel
    from tests.graph_scripts import full_script
    from training.rewards import AgentReward

    running, peak, real = [0], [0], api.arun_agent

    async def counted(*args, **kwargs):
        running[0] += 1
        peak[0] = max(peak[0], running[0])
        try:
            return await real(*args, **kwargs)
        finally:
            running[0] -= 1

    monkeypatch.setattr(api, "arun_agent", counted)
    settings = BackboneSettings(inspect_mode="plan", cache_path=None, traces_path=str(tmp_path / "traces.sqlite"))
    fn = AgentReward(preset="decomposed", max_concurrency=4, model=ScriptedChatModel(full_script(), delay_s=0.05),
                     settings=settings)
    rng = np.random.default_rng(0)
    clips = [textured_frames(rng) for _ in range(16)]
    with RewardRunner(fn, "agent") as runner:
        parts = [runner.submit(clips[4 * g:4 * g + 4], ["pick the cup"] * 4, fps=8.0, iteration=1, rank=0,
                               first_index=4 * g) for g in range(4)]
        out = merge_outcomes([p.result(timeout=120) for p in parts])
    assert all(r is not None for r in out.rewards) and 1 < peak[0] <= 4, peak[0]


@pytest.mark.slow
def test_training_rewards_and_weights_do_not_depend_on_overlap(tmp_path):
    """The smoke config for 2 iterations with each setting: the same rewards, the same trained weights."""
    import torch

    def run(mode: str) -> Path:
        out = tmp_path / mode
        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
        cmd = [sys.executable, "-m", "training.train", "--config", str(ROOT / "training" / "configs" / "smoke.yaml"),
               "--output_dir", str(out), "--progress", "false", "--tensorboard", "false", "--max_iterations", "2",
               "--checkpoint_every", "2", "--export", "none", "--reward_overlap", mode]
        run_to_end(cmd, timeout=600, what="training", env=env)
        return out

    off, groups = run("off"), run("groups")
    rows = [[json.loads(line) for line in (d / "rewards.jsonl").read_text().splitlines()] for d in (off, groups)]
    assert len(rows[0]) == 16 and rows[0] == rows[1]  # 2 iterations x 2 prompts x G = 4
    weights = [torch.load(d / "checkpoints" / "iter_000002" / "mp_rank_00_model_states.pt", map_location="cpu",
                          weights_only=False)["module"] for d in (off, groups)]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
