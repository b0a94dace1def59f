"""training/rewards.py: validation of reward callables and the built-in adapters."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from graph.gate import diagnostic_reward
from tests.graph_scripts import textured_frames
from training.grpo import group_advantages
from training.rewards import (
    BrightnessReward,
    MotionReward,
    RewardLengthError,
    build_reward,
    call_reward,
)


def _clips(n: int = 2, t: int = 3) -> list[np.ndarray]:
    return [np.zeros((t, 4, 4, 3), dtype=np.uint8) for _ in range(n)]


def test_nan_inf_none_are_ineligible_and_counted():
    def reward(videos, prompts, **meta):
        return [0.5, None, float("nan"), float("inf"), -float("inf"), 1]

    out = call_reward(reward, "fake", _clips(6), ["p"] * 6)
    assert out.rewards == [0.5, None, None, None, None, 1.0]
    assert out.counts == {"none": 1, "nan": 1, "inf": 2, "error": 0}
    assert out.ineligible_count == 4
    assert out.reasons[0] is None and "None" in out.reasons[1] and "nan" in out.reasons[2]


def test_wrong_length_names_the_reward():
    with pytest.raises(RewardLengthError, match="reward 'short'.*1 values for 3 videos"):
        call_reward(lambda v, p, **m: [1.0], "short", _clips(3), ["p"] * 3)
    with pytest.raises(RewardLengthError, match="reward 'scalar' returned float"):
        call_reward(lambda v, p, **m: 1.0, "scalar", _clips(1), ["p"])


def test_async_reward_is_awaited_and_meta_passed():
    seen = {}

    async def reward(videos, prompts, **meta):
        await asyncio.sleep(0)
        seen.update(meta)
        return [float(i) for i in range(len(videos))]

    out = call_reward(reward, "async", _clips(3), ["a", "b", "c"], iteration=4, fps=8.0)
    assert out.rewards == [0.0, 1.0, 2.0] and seen == {"iteration": 4, "fps": 8.0}


def test_raising_reward_makes_batch_ineligible_with_reason():
    def reward(videos, prompts, **meta):
        raise RuntimeError("backend down")

    out = call_reward(reward, "flaky", _clips(2), ["p", "q"])
    assert out.rewards == [None, None] and out.counts["error"] == 2
    assert "backend down" in out.reasons[0]


def test_all_ineligible_group_skipped_and_counted():
    out = call_reward(lambda v, p, **m: [None, float("nan"), 0.2, 0.8], "r", _clips(4), ["p"] * 4)
    adv, valid, stats = group_advantages(out.rewards, [0, 0, 1, 1], a_max=5.0, eps=0.0)
    assert stats.skipped_groups == 1 and stats.ineligible_count == 2
    assert valid.tolist() == [False, False, True, True] and adv.tolist() == pytest.approx([0, 0, -1, 1])


def test_brightness_reward_region_and_skip_first():
    clip = np.zeros((3, 4, 4, 3), dtype=np.uint8)
    clip[0] = 255  # conditioning frame: ignored
    clip[1:, :2, :2] = 255  # top-left quarter bright in generated frames
    top_left = BrightnessReward(region=(0.0, 0.0, 0.5, 0.5))
    whole = BrightnessReward()
    assert top_left([clip], ["p"]) == [pytest.approx(1.0)]
    assert whole([clip], ["p"]) == [pytest.approx(0.25)]
    assert BrightnessReward(target="dark")([clip], ["p"]) == [pytest.approx(0.75)]
    # a malformed clip is ineligible, the others still scored
    assert whole([np.zeros((3, 4, 4), np.float32), clip], ["p", "q"]) == [None, pytest.approx(0.25)]
    with pytest.raises(ValueError, match="region"):
        BrightnessReward(region=(0.5, 0.0, 0.2, 1.0))


def test_brightness_region_edges_on_whole_pixels_despite_float_rounding():
    """0.29 * 100 is 28.999999999999996 and 0.56 * 100 is 56.00000000000001: the box [0.29, 0.56] of a
    100-pixel frame is columns 29-55, not 28-56 (the dark columns just outside it stay out)."""
    assert 0.29 * 100 < 29 and 0.56 * 100 > 56
    clip = np.full((2, 1, 100, 3), 255, np.uint8)
    clip[:, :, [28, 56]] = 0
    assert BrightnessReward(region=(0.29, 0.0, 0.56, 1.0))([clip], ["p"]) == [pytest.approx(1.0)]


def test_motion_reward_hand_computed():
    clip = np.zeros((3, 2, 2, 3), dtype=np.uint8)
    clip[1] = 51  # frame diffs: 51 then 51 -> mean 51/255 = 0.2
    assert MotionReward()([clip], ["p"]) == [pytest.approx(0.2)]
    assert MotionReward()([clip[:1]], ["p"]) == [None]


def test_build_reward_errors_before_model_load():
    assert isinstance(build_reward("brightness", {"region": [0, 0, 1, 0.5]}), BrightnessReward)
    with pytest.raises(ValueError, match="reward 'brightness': bad reward_options"):
        build_reward("brightness", {"colour": "red"})
    with pytest.raises(ValueError, match="unknown reward"):
        build_reward("vibes", {})


def test_agent_reward_scores_with_one_agent_across_batches(monkeypatch, tmp_path):
    """The real agent (scripted backbone): rewards and reasons per clip, one agent (and one set of tool
    models) for every batch, the inspect mode of the settings the entry point read, clips removed (from
    disk and from the agent's frame cache)."""
    import graph.builder
    from graph.settings import BackboneSettings
    from graph.testing import ScriptedChatModel
    from tests.graph_scripts import full_script
    from training.rewards import AgentReward

    builds = []
    real_build = graph.builder.build_reward_agent
    monkeypatch.setattr(graph.builder, "build_reward_agent", lambda *a, **k: builds.append(a[0]) or real_build(*a, **k))
    model = ScriptedChatModel(full_script())
    settings = BackboneSettings(inspect_mode="plan", cache_path=None, traces_path=str(tmp_path / "traces.sqlite"))
    fn = AgentReward(preset="no_motion", max_concurrency=3, video_dir=str(tmp_path / "clips"), model=model,
                     settings=settings)
    (tmp_path / "clips").mkdir()
    rng = np.random.default_rng(0)
    clips = [textured_frames(rng), np.full((9, 32, 32, 3), 90, dtype=np.uint8)]
    calls = 0
    for iteration in (1, 2):
        out = call_reward(fn, "agent", clips, ["pick the cup", "open the drawer"], fps=8.0, iteration=iteration)
        calls += out.usage["calls"]
        assert out.rewards[0] == pytest.approx(0.975) and out.rewards[1] == 0.0  # textured clip / uniform clip
        assert any("uniform" in r for r in fn.last_reasons[1])
        c = out.components  # the scores and gate inputs behind each reward, for the trainer's logs
        assert sorted(c) == ["P", "T", "V", "failure", "unverifiable"]
        assert diagnostic_reward(c["T"][0], c["P"][0], c["V"][0]) == pytest.approx(out.rewards[0])
        assert c["failure"][0] == 0.0 and c["unverifiable"][0] == 0.0
        assert [c[k][1] for k in ("T", "P", "V")] == [None] * 3  # the quality pre-check: no judgment made
    assert len(builds) == 1 and builds[0].inspect_mode == "plan" and builds[0].preset == "no_motion"
    assert calls == len(model.calls) > 0  # every model call was counted (the scripted model reports no tokens)
    stages = [c.stage for c in model.calls]
    assert "plan" in stages and "inspect" not in stages  # RAA_INSPECT_MODE reached the training reward
    assert not any((tmp_path / "clips").iterdir())  # temporary clips removed after scoring
    assert fn._frames.nbytes == 0  # ... and dropped from the agent's frame cache (nobody can ask for them)


def test_run_ids_travel_from_a_reward_batch_to_the_outcome():
    from training.rewards import RewardBatch

    def reward(videos, prompts, **meta):
        return RewardBatch([0.5, None], [[], ["observe: timeout"]], ["run-a", "run-b"])

    out = call_reward(reward, "agent", _clips(), ["a", "b"])
    assert out.run_ids == ["run-a", "run-b"] and out.rewards == [0.5, None]
    assert call_reward(lambda v, p, **m: [0.1, 0.2], "plain", _clips(), ["a", "b"]).run_ids == [None, None]
    with pytest.raises(RewardLengthError, match="run ids"):
        call_reward(lambda v, p, **m: RewardBatch([0.1, 0.2], [[], []], ["x"]), "agent", _clips(), ["a", "b"])


def test_components_are_checked_numbers_and_dropped_for_ineligible_items():
    from training.rewards import RewardBatch

    def reward(videos, prompts, **meta):
        return RewardBatch([0.5, 0.25, None, 0.0], [[]] * 4, components={
            "T": [1, 0.5, 0.9, float("nan")], "failure": [False, True, True, None], "note": ["x", None, 1, 2]})

    out = call_reward(reward, "agent", _clips(4), ["a"] * 4)
    assert out.components == {"T": [1.0, 0.5, None, None], "failure": [0.0, 1.0, None, None],
                              "note": [None, None, None, 2.0]}  # bools 0/1; NaN, text and ineligible: None
    assert call_reward(lambda v, p, **m: [0.1, 0.2], "plain", _clips(), ["a", "b"]).components == {}
    for bad, match in (({"T": [1.0]}, "component 'T' must be a name with one value per video"),
                       ({"T-score": [1.0, 1.0]}, "component 'T-score'"), ({"T": 1.0}, "got float")):
        with pytest.raises(RewardLengthError, match=match):
            call_reward(lambda v, p, b=bad, **m: RewardBatch([0.1, 0.2], [[], []], components=b), "x", _clips(), ["a", "b"])


def test_usage_is_summed_over_every_item_and_bookkeeping_never_costs_a_reward():
    from training.reward_outcome import sum_usage
    from training.rewards import RewardBatch

    assert sum_usage([{"calls": 2, "input_tokens": 10}, {"calls": 1, "bad-key": 5, "images": -1, "x": 1.5,
                                                         "flag": True}, "junk"]) == {"calls": 3, "input_tokens": 10}
    out = call_reward(lambda v, p, **m: RewardBatch([0.5, None], [[], ["timeout"]],
                                                    usage=[{"calls": 3}, {"calls": 5}]), "agent", _clips(), ["a", "b"])
    assert out.rewards == [0.5, None] and out.usage == {"calls": 8}  # the ineligible clip's calls cost too


def test_agent_reward_keeps_clips_that_its_traces_name(tmp_path):
    """videos="keep": each rollout's clip stays where its trace says, so `raa report RUN_ID` of a training
    reward can show it; the run ids name real traces."""
    from graph.settings import BackboneSettings
    from graph.testing import ScriptedChatModel
    from graph.tracing import open_saver, read_trace
    from tests.graph_scripts import full_script
    from training.rewards import AgentReward

    traces = tmp_path / "traces.sqlite"
    settings = BackboneSettings(inspect_mode="plan", cache_path=None, traces_path=str(traces))
    fn = AgentReward(preset="decomposed", video_dir=str(tmp_path / "clips"), videos="keep",
                     model=ScriptedChatModel(full_script()), settings=settings)
    clips = [np.random.default_rng(0).integers(0, 255, (9, 32, 32, 3), dtype=np.uint8)] * 2
    out = call_reward(fn, "agent", clips, ["pick the cup", "open the drawer"], fps=8.0, iteration=7, rank=1)
    assert out.rewards[0] is not None and all(out.run_ids)
    for i, run_id in enumerate(out.run_ids):
        trace = read_trace(open_saver(traces), run_id)
        assert trace.values["video"] == str((tmp_path / "clips" / "it000007" / f"r1_{i:04d}.mp4").resolve())
        assert Path(trace.values["video"]).is_file()
    held_out = call_reward(fn, "agent", clips[:1], ["pick the cup"], fps=8.0, iteration=7, rank=0, phase="eval")
    assert read_trace(open_saver(traces), held_out.run_ids[0]).values["video"].endswith("eval000007/r0_0000.mp4")
    assert fn._frames.nbytes > 0  # kept clips keep their cached frames (a report may show them)
    with pytest.raises(ValueError, match="keep needs video_dir"):
        AgentReward(videos="keep")


def test_agent_reward_rejects_a_bad_preset_before_any_model_loads():
    from training.rewards import build_reward

    with pytest.raises(ValueError, match="preset"):
        build_reward("agent", {"preset": "fulll"})


@pytest.mark.parametrize("bound", [2.5, True, "4"])
def test_agent_reward_rejects_a_max_concurrency_that_is_not_an_int(bound):
    """`reward_options: {max_concurrency: 2.5}` made a semaphore that never blocks (asyncio's waits only at exactly
    0): every run of every group in flight at once, against the backbone. Refused when built, before any model."""
    from training.rewards import AgentReward

    with pytest.raises(ValueError, match="max_concurrency must be an int >= 1"):
        AgentReward(max_concurrency=bound)


def test_async_reward_called_from_inside_a_running_event_loop():
    """call_reward from sync code that runs inside an event loop (a notebook) still awaits the reward."""
    async def reward(videos, prompts, **meta):
        await asyncio.sleep(0)
        return [0.5] * len(videos)

    async def cell():
        return call_reward(reward, "async", _clips(2), ["a", "b"])

    assert asyncio.run(cell()).rewards == [0.5, 0.5]


def test_reward_batch_carries_reasons_into_the_outcome():
    from training.rewards import RewardBatch

    def reward(videos, prompts, **meta):
        return RewardBatch([0.5, None, None], [[], ["essential requirement unverifiable"], []])

    out = call_reward(reward, "agent", _clips(3), ["a", "b", "c"])
    assert out.rewards == [0.5, None, None] and out.counts["none"] == 2
    assert out.reasons[0] is None
    assert out.reasons[1] == "reward 'agent' returned None (ineligible): essential requirement unverifiable"
    assert out.reasons[2] == "reward 'agent' returned None (ineligible)"
    with pytest.raises(RewardLengthError, match="2 reason lists"):
        call_reward(lambda v, p, **m: RewardBatch([0.1, 0.2, 0.3], [[], []]), "bad", _clips(3), ["a"] * 3)


def test_values_that_are_no_number_are_error_items_not_a_stopped_run():
    """10**400 overflows float (OverflowError stopped the run); text "0.5" was read as 0.5; a bool is 1 / 0."""
    from training.reward_outcome import check_reward_output

    out = check_reward_output([10**400, "0.5", b"0.5", True, False, 0.25], "r", 6)
    assert out.rewards == [None, None, None, 1.0, 0.0, 0.25]
    assert out.counts == {"none": 0, "nan": 0, "inf": 0, "error": 3}
    assert out.reasons[0].startswith("reward 'r' returned a non-number 1000") and out.reasons[0].endswith("...")
    assert out.reasons[1] == "reward 'r' returned a non-number '0.5'"


def test_motion_counts_the_jump_from_the_conditioning_frame_that_brightness_leaves_out():
    """Decided in training/verifiable_rewards.py: frame 0 (conditioning) is out of the brightness reward by
    default, but the change from it to the generated frame 1 is motion the policy made."""
    clip = np.zeros((3, 2, 2, 3), dtype=np.uint8)
    clip[0] = 255  # only the conditioning frame differs; the generated frames hold still
    assert BrightnessReward()([clip], ["p"]) == [pytest.approx(0.0)]
    assert MotionReward()([clip], ["p"]) == [pytest.approx(0.5)]  # diffs 255, 0 -> mean 0.5
    assert MotionReward(target="less")([clip], ["p"]) == [pytest.approx(0.5)]
