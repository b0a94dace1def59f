"""The reasonableness judge: what it sees (never the preset), retries, unjudged and skipped rows."""

from __future__ import annotations

import asyncio
import json
import re

import numpy as np
import pytest

from evals.judge import JudgeSettings, RewardJudge
from evals.reliability import run_reward_eval
from evals.reward_scorer import EvalClip
from evals.table import DISPLAY_NAMES, PAPER_ORDER
from graph.schemas import RewardResult
from graph.testing import ScriptedChatModel
from tools.video import write_video


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    root = tmp_path_factory.mktemp("judge_clips")
    rng = np.random.default_rng(0)
    out = []
    for name, frames, label in (("long", 100, "failure"), ("short", 20, "progress")):
        video = rng.integers(0, 255, (frames, 32, 32, 3), dtype=np.uint8)
        path = write_video(root / f"{name}.mp4", video, fps=10)
        out.append(EvalClip(str(path), "lift the cube onto the shelf", label, "partial", "lift"))
    return out


class Scorer:
    """Reasons shaped like the agent's: the direct preset prefixes its rationale with its stage name."""

    async def score(self, preset, clips):
        first = "direct: the gripper lifts the cube at frame 12" if preset == "direct" else \
            "R1 met: the gripper lifts the cube at frame 12"
        return [RewardResult(reward=0.5, status="scored", reasons=[first, "note: judgment kept (no_audit, wmreward)"],
                             preset=preset, run_id=f"{preset}-{i}") for i, _ in enumerate(clips)]


def _judge(script) -> tuple[RewardJudge, ScriptedChatModel]:
    model = ScriptedChatModel({"judge": script})
    return RewardJudge.from_settings(JudgeSettings(attempts=3), model=model), model


def test_judge_never_sees_the_preset(clips, tmp_path):
    judge, model = _judge([{"reasonable": True, "rationale": "matches frames 10-40"}])
    presets = ["direct", "full", "no_motion", "wmreward"]
    out = asyncio.run(run_reward_eval(clips, presets, tmp_path, Scorer(), judge))
    assert len(model.calls) == 8 and all(c.stage == "judge" for c in model.calls)
    forbidden = [re.compile(rf"\b{re.escape(p)}\b", re.IGNORECASE) for p in PAPER_ORDER]
    forbidden += [re.compile(re.escape(DISPLAY_NAMES[p]), re.IGNORECASE) for p in PAPER_ORDER]
    for call in model.calls:
        text = call.text()
        assert "lift the cube onto the shelf" in text and "0.500" in text and "frame 12" in text
        assert not [f.pattern for f in forbidden if f.search(text)], text
        assert "-0" not in text and "-1" not in text  # run ids (preset-index) are not shown either
        assert call.messages[0].content.splitlines()[0] == "# stage: judge"
    images = sorted(c.images() for c in model.calls)
    assert images == [20] * 4 + [64] * 4  # up to 64 uniformly sampled frames
    assert all(m.r == 2 for m in out.metrics)


def test_judge_never_sees_the_runs_process_notes(clips, tmp_path):
    """A run's process notes (RewardResult.notes, the last of its reasons) say which modules ran (a repair
    round, the extra-frame allowance of visual verification, the surprise scorer): the judge sees the
    judgments only; the row keeps every reason and the notes."""
    notes = ["repair: R1 kept met (change to not_met cited no frame shown)",
             "frames [3] added from the extra-frame allowance"]

    class Noted:
        async def score(self, preset, clips):
            return [RewardResult(reward=0.5, status="scored", reasons=["R1 met: the gripper lifts the cube", *notes],
                                 notes=notes, preset=preset, run_id=f"r{i}") for i, _ in enumerate(clips)]

    judge, model = _judge([{"reasonable": True, "rationale": "ok"}])
    asyncio.run(run_reward_eval(clips, ["full"], tmp_path, Noted(), judge))
    assert len(model.calls) == 2
    for call in model.calls:
        assert "R1 met: the gripper lifts the cube" in call.text()
        assert "repair" not in call.text() and "allowance" not in call.text()
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert all(r["notes"] == notes and r["reasons"][-2:] == notes for r in rows)


def test_explanation_without_notes():
    from evals.judge import explanation

    assert explanation(["a", "n1", "n2"], ["n1", "n2"]) == ["a"]
    assert explanation(["a", "n1"], []) == ["a", "n1"]  # a row from before notes were kept apart
    assert explanation(["n1", "a"], ["n1"]) == ["a"]  # not at the end: left out wherever it stands


def test_redact_reason():
    from evals.judge import redact_reason

    assert redact_reason("direct: looks done") == "looks done"
    assert redact_reason("R2 not_met: the block never moves") == "R2 not_met: the block never moves"
    assert redact_reason("Quality : uniform frames") == "uniform frames"
    assert redact_reason("kept after no_audit and task_blind") == "kept after [module] and [module]"


def test_failed_judge_is_unjudged_and_not_counted(clips, tmp_path):
    judge, model = _judge([RuntimeError("judge endpoint down")])
    out = asyncio.run(run_reward_eval(clips[:1], ["full"], tmp_path, Scorer(), judge))
    m = out.metrics[0]
    assert len(model.calls) == 3  # bounded: 3 attempts
    assert m.r == 0 and m.unjudged == 1
    verdict = out.rows[0]["judge"]
    assert verdict["status"] == "unjudged" and verdict["reasonable"] is None and "3 attempts" in verdict["rationale"]


def test_judge_retry_then_success(clips):
    judge, model = _judge([RuntimeError("blip"), {"reasonable": False, "rationale": "no lift visible"}])
    verdict = asyncio.run(judge.judge(clips[1].path, "lift the cube", 0.9, "scored", ["lifted"]))
    assert verdict.status == "judged" and verdict.reasonable is False and verdict.attempts == 2
    assert len(model.calls) == 2 and not verdict.accepted


def test_a_fault_message_longer_than_the_rationale_field_leaves_the_row_unjudged():
    """A 5000-character fault message failed JudgeVerdict's max_length: judge(), which never raises for
    model or video failures, raised a pydantic ValidationError."""
    from graph.backbone import BackboneFault

    class LongFaults:
        async def astructured(self, *args, **kwargs):
            raise BackboneFault("judge", "schema", "reply failed validation: " + "x" * 5000)

    async def no_frames(path):
        return []

    judge = RewardJudge(LongFaults(), attempts=2)
    judge._blocks = no_frames
    verdict = asyncio.run(judge.judge("clip.mp4", "lift the cube", 0.9, "scored", ["lifted"]))
    assert verdict.status == "unjudged" and len(verdict.rationale) <= 4000  # JudgeVerdict's max_length
    assert verdict.rationale.startswith("judge failed after 2 attempts: schema: reply failed validation: xxx")
    assert verdict.rationale.endswith("characters cut)")

    async def long_error(path):
        raise OSError("y" * 9000)

    judge._blocks = long_error
    verdict = asyncio.run(judge.judge("clip.mp4", "lift the cube", 0.9, "scored", ["lifted"]))
    assert verdict.status == "unjudged" and verdict.rationale.startswith("frames unavailable: OSError: yyy")
    assert len(verdict.rationale) <= 4000


def test_ineligible_output_is_skipped_without_a_call(clips):
    judge, model = _judge([{"reasonable": True}])
    verdict = asyncio.run(judge.judge(clips[0].path, "lift", None, "ineligible", ["observe: timeout"]))
    assert verdict.status == "skipped" and not verdict.accepted and model.calls == []


def test_bad_video_is_unjudged(tmp_path):
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"not a video")
    judge, model = _judge([{"reasonable": True}])
    verdict = asyncio.run(judge.judge(str(bad), "lift", 0.4, "scored", []))
    assert verdict.status == "unjudged" and "frames unavailable" in verdict.rationale and model.calls == []


def test_unconfigured_judge_and_settings_from_env():
    judge = RewardJudge.from_settings(JudgeSettings())
    verdict = asyncio.run(judge.judge("x.mp4", "lift", 0.4, "scored", []))
    assert verdict.status == "unjudged" and "RAA_JUDGE_BASE_URL" in verdict.rationale
    env = {"RAA_JUDGE_BASE_URL": "http://127.0.0.1:9/v1", "RAA_JUDGE_MODEL": "judge-vl", "RAA_JUDGE_API_KEY": "k",
           "RAA_JUDGE_MAX_FRAMES": "32", "RAA_JUDGE_STRUCTURED_METHOD": "json_mode"}
    settings = JudgeSettings.from_env(env)
    assert settings.configured and settings.max_frames == 32 and settings.method == "json_mode"
    assert settings.backbone_settings().temperature == 0.0 and settings.backbone_settings().cache_path is None
    RewardJudge.from_settings(settings)  # builds ChatOpenAI without connecting
    with pytest.raises(ValueError, match="RAA_JUDGE_MAX_FRAMES"):
        JudgeSettings.from_env({"RAA_JUDGE_MAX_FRAMES": "many"})
    with pytest.raises(ValueError, match="1..64"):
        JudgeSettings(max_frames=65)


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_judge_timeout_out_of_range_is_a_settings_error(value):
    """Refused where the CLI reads the settings (exit 2), not later by the Backbone (a traceback)."""
    with pytest.raises(ValueError, match="RAA_JUDGE_TIMEOUT_S"):
        JudgeSettings.from_env({"RAA_JUDGE_TIMEOUT_S": value})


@pytest.mark.parametrize("value", ["0", "101"])
def test_judge_attempts_out_of_range_is_a_settings_error(value):
    """Over 100 attempts, every verdict (a judged one too) failed JudgeVerdict's bound and the row read "judge
    crashed: ValidationError"; refused where the settings are read instead."""
    with pytest.raises(ValueError, match="RAA_JUDGE_ATTEMPTS"):
        JudgeSettings.from_env({"RAA_JUDGE_ATTEMPTS": value})


def test_frame_sampler_decodes_a_rewritten_clip_again(tmp_path):
    """Its cache is filed under the file's version: a clip written anew at the same path is not judged
    on the old clip's frames."""
    from evals.judge import FrameSampler

    path = tmp_path / "clip.mp4"
    write_video(path, np.full((8, 32, 32, 3), 30, np.uint8), fps=8.0)
    sampler = FrameSampler(max_frames=4)
    first = sampler.blocks(path)
    assert sampler.blocks(path) is first  # cached while the file is unchanged
    write_video(path, np.full((16, 32, 32, 3), 220, np.uint8), fps=8.0)
    second = sampler.blocks(path)
    assert second is not first and second[1]["image_url"]["url"] != first[1]["image_url"]["url"]


def test_judge_frame_locks_last_only_while_requests_are_in_flight(clips):
    """One lock per clip and event loop, dropped when unused: the map grew by one per clip judged, and a
    lock a contended request had bound to one loop was reused under the next `asyncio.run`."""
    judge = RewardJudge(None)

    async def many():
        return await asyncio.gather(*(judge._blocks(c.path) for c in clips for _ in range(3)))

    for _ in range(2):  # two event loops, each with concurrent requests for the same clips
        blocks = asyncio.run(many())
        assert blocks[0] is blocks[1] is blocks[2] and blocks[3] is not blocks[0]  # each clip decoded once
        assert len(judge._locks) == 0


def test_frame_sampler_decodes_at_the_size_it_sends(tmp_path, read_sizes):
    """64 frames per clip were decoded at the clip's full size before being cut to 512 pixels (400 MB for
    a 1080p clip, several GB with 16 clips judged at once). The images sent keep their size and picture."""
    import base64

    import cv2

    from evals.judge import FrameSampler
    from tools.video import VideoReader, image_content_blocks

    yy, xx = np.mgrid[0:64, 0:96]
    frames = np.stack([np.stack([xx * 2 + k, yy * 3, (xx + yy + 8 * k) % 256], -1) for k in range(6)])
    path = write_video(tmp_path / "wide.mp4", frames.astype(np.uint8), fps=8.0)
    blocks = FrameSampler(max_frames=4, long_side=48).decode(path)
    assert read_sizes == [(48, 32)]  # never the full 96x64
    with VideoReader(path) as reader:  # what was sent before: full-size frames cut down with OpenCV
        full = reader.read([0, 2, 3, 5])
    before = image_content_blocks(full, [0, 2, 3, 5], 6, 8.0, long_side=48)

    def image(block):
        data = base64.b64decode(block["image_url"]["url"].split(",", 1)[1])
        return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR).astype(int)

    assert [b["text"] for b in blocks[::2]] == [b["text"] for b in before[::2]]
    for new, old in zip(blocks[1::2], before[1::2], strict=True):
        a, b = image(new), image(old)
        assert a.shape == b.shape == (32, 48, 3)
        assert np.abs(a - b).mean() < 4
    small = write_video(tmp_path / "small.mp4", frames[:, :32, :40].astype(np.uint8), fps=8.0)
    assert image(FrameSampler(max_frames=2, long_side=48).decode(small)[1]).shape == (32, 40, 3)  # not upscaled


@pytest.mark.parametrize("reward", [0.0004, 1e-7, 0.0001234])
def test_a_positive_reward_never_reads_as_zero_to_the_judge(reward):
    """F+ counts any reward > 0 as positive, but the judge was shown 3 decimals: a direct score of 0.0004 read
    "0.000", so the judge could accept as a zero the reward F+ counted as a false positive."""
    from evals.judge import format_reward

    shown = format_reward(reward, "scored").split(" ")[0]
    assert float(shown) > 0 and abs(float(shown) - reward) <= 0.05 * reward
    assert format_reward(0.0, "zero").startswith("0.000 ") and format_reward(0.5, "scored").startswith("0.500 ")
    assert format_reward(0.9996, "scored").startswith("1.000 ")  # rounding up is harmless: still positive
