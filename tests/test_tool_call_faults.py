"""The inspect loop's tool executor (graph.nodes.evidence.execute): a failure of the tool itself ends the run
ineligible with its reason; only the model's own invalid arguments go back to the model."""

from __future__ import annotations

import numpy as np
import pytest
from graph_scripts import FakeSurprise, full_script, tool_call
from langgraph.checkpoint.memory import InMemorySaver

from graph import AgentConfig, AgentTools, build_reward_agent
from graph.backbone import Backbone
from graph.testing import ScriptedChatModel
from tools.motion import MotionTracks
from tools.motion.base import resolve_queries
from tools.video import FrameIndexError, VideoDecodeError

TRACK = {"start_frame": 0, "end_frame": 20}


class RaisingTracker:
    """MotionTracker fake whose own code raises ValueError (a tool bug, not a bad request)."""

    def track(self, frames, *, grid_size=None, queries=None):
        raise ValueError("operands could not be broadcast together")


class UnmappableTracks(MotionTracks):
    """Tracks that fail when the agent maps them back to the clip's pixels (a custom tracker's result type)."""

    def rescaled(self, sx: float, sy: float) -> MotionTracks:
        raise ValueError("tracks are in an unknown frame size")


class UnmappableTracker:
    """MotionTracker fake returning `UnmappableTracks` (still points at the queries)."""

    def track(self, frames, *, grid_size=None, queries=None):
        q = resolve_queries(frames.shape, grid_size, queries)
        t = len(frames)
        return UnmappableTracks(tracks=np.repeat(q[None, :, 1:3], t, 0), visible=np.ones((t, len(q)), bool),
                                query_frames=q[:, 0].astype(np.int64))


def _run(clip, inspect: list, tracker, **tools) -> dict:
    model = ScriptedChatModel(full_script(inspect=inspect))
    agent = build_reward_agent(AgentConfig(preset="full"),
                               backbone=Backbone(model, max_retries=1, retry_wait=(0.0, 0.0)),
                               tools=AgentTools(tracker=tracker, surprise=FakeSurprise(), **tools),
                               checkpointer=InMemorySaver())
    return agent.invoke({"video": str(clip), "instruction": "push the red block to the right", "run_id": "r"},
                        {"configurable": {"thread_id": "r"}})


@pytest.mark.parametrize("failure", ["tracker", "tracks"])
def test_a_valueerror_from_the_tracking_tool_is_an_ineligible_tool_fault(clip, failure):
    """A ValueError raised while tracking (the tracker, its tracks mapped back to the clip) is the tool's failure:
    it was answered to the model as "invalid arguments for track_motion" and the run went on to a reward without
    the motion evidence. (A broken frame-size setting, track_short_side=0, is now refused when the tools are
    built: tests/test_frame_sizes.py.)"""
    tracker, tools = {"tracker": (RaisingTracker(), {}),
                      "tracks": (UnmappableTracker(), {"track_short_side": 64})}[failure]  # 128-pixel clip: mapped back
    out = _run(clip, [tool_call("track_motion", TRACK), "Tracks seen."], tracker, **tools)
    result = out["result"]
    assert result.reward is None and result.status == "ineligible"
    assert any(r.startswith("tool_call: tool: motion run: ValueError") for r in result.reasons), result.reasons
    assert not any("invalid arguments" in e["text"] for e in out.get("exchanges", []))


class VideoErrorTracker:
    """MotionTracker fake whose own code raises a VideoError (indexing or reading something of its own)."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def track(self, frames, *, grid_size=None, queries=None):
        raise self.error


@pytest.mark.parametrize("error", [FrameIndexError("frame 40 of 21"), VideoDecodeError("cache.mp4: corrupt")])
def test_a_video_error_of_the_tracker_is_its_tool_fault_not_the_clips(clip, error):
    """The tracker gets decoded frames: its VideoError is its own (tools.errors.run_tool), an outage; a FrameIndexError
    was the agent's "internal" fault and a VideoDecodeError the clip's final video fault."""
    result = _run(clip, [tool_call("track_motion", TRACK), "Tracks seen."], VideoErrorTracker(error))["result"]
    assert result.status == "ineligible" and [f.kind for f in result.faults] == ["tool"] and result.outage
    assert result.faults[0].message == f"motion run: {type(error).__name__}: {error}"


def test_an_error_raised_while_a_tool_runs_is_not_the_models_invalid_arguments(clip, monkeypatch):
    """The executor answers "invalid arguments" only for arguments that fail the tool's schema: a ValueError
    from the tool's own code (here the overlays step, past the tracking) is a fault of the run, whatever
    its type."""
    import graph.nodes.evidence as evidence
    from tools.motion import LKTracker

    async def broken(*args, **kwargs):
        raise ValueError("a bug in the overlay code")

    monkeypatch.setattr(evidence, "track_overlays", broken)
    out = _run(clip, [tool_call("track_motion", TRACK), "Tracks seen."], LKTracker())
    result = out["result"]
    assert result.reward is None and result.status == "ineligible"
    assert any(r.startswith("tool_call:") and "a bug in the overlay code" in r for r in result.reasons), result.reasons
    assert not any("invalid arguments" in e["text"] for e in out.get("exchanges", []))


@pytest.mark.parametrize("args", [{"start_frame": -1, "end_frame": 20},
                                  {"start_frame": 0, "end_frame": 20, "points": [[float("nan"), 0.5]]}],
                         ids=["negative-frame", "nan-point"])
def test_invalid_track_arguments_go_back_to_the_model(clip, args):
    """Arguments the model got wrong are its to fix: the call is answered "invalid arguments" and the run is
    scored. A NaN point (JSON from the model may carry NaN) reached the tracker, which refused it, and the
    run was ineligible for the model's typo."""
    from tools.motion import LKTracker

    out = _run(clip, [tool_call("track_motion", args), "Tracks seen."], LKTracker())
    assert out["result"].status == "scored", out["result"].reasons
    assert out["exchanges"][0]["text"].startswith("invalid arguments for track_motion")
    assert not out["exchanges"][0]["frames"]


class BrokenTracksTracker:
    """MotionTracker fake (a third-party tracker) whose tracks break the contract at a visible point-frame: a NaN
    or infinite position, or one point too many."""

    def __init__(self, broken: str) -> None:
        self.broken = broken

    def track(self, frames, *, grid_size=None, queries=None):
        q = resolve_queries(frames.shape, grid_size, queries)
        t = len(frames)
        tracks = np.repeat(q[None, :, 1:3], t, 0)
        if self.broken == "extra-point":
            tracks = np.concatenate([tracks, tracks[:, :1]], axis=1)
            q = np.concatenate([q, q[:1]])
        else:
            tracks[3, 0] = float(self.broken)
        return MotionTracks(tracks=tracks, visible=np.ones((t, len(q)), bool), query_frames=q[:, 0].astype(np.int64))


@pytest.mark.parametrize("broken", ["nan", "inf", "1e30", "extra-point"])
def test_tracks_that_break_the_tracker_contract_are_an_ineligible_tool_fault(clip, broken):
    """An injected tracker's NaN / infinite position at a tracked frame, or a point the agent did not ask for, is
    the tool's failure: the NaN step was silently not motion, the infinite one "moved" a still point, and the
    run was scored on that summary. So is a finite but absurd position (1e30 px): it reached the model as "inf"
    distances."""
    args = {**TRACK, "points": [[0.5, 0.5]]} if broken == "extra-point" else TRACK
    out = _run(clip, [tool_call("track_motion", args), "Tracks seen."], BrokenTracksTracker(broken))
    result = out["result"]
    assert result.reward is None and result.status == "ineligible", result.reasons
    want = {"extra-point": "1 query points", "1e30": "positions far outside the"}.get(broken, "non-finite positions")
    assert any(r.startswith("tool_call: tool: motion run: the tracker returned") and want in r
               for r in result.reasons), result.reasons


class BrokenSurprise:
    """SurpriseScorer fake (a third-party scorer) whose evidence breaks the contract."""

    def __init__(self, broken: str) -> None:
        self.broken = broken

    def score(self, frames):
        from tools.surprise import SurpriseEvidence, SurpriseWindow

        if self.broken == "not-evidence":
            return {"status": "ok"}
        if self.broken == "ok-without-windows":
            return SurpriseEvidence(status="ok", num_frames=len(frames))
        value, end = (float("nan"), 23) if self.broken == "nan" else (0.3, 900)
        w = SurpriseWindow(start=8, end=end, frames=list(range(8, 24)), surprise=value)
        return SurpriseEvidence(status="ok", windows=[w], top=[w], mean=value, num_frames=len(frames))


@pytest.mark.parametrize("broken,reason", [("nan", "NaN or infinite surprise"), ("past-the-clip", "windows past"),
                                           ("not-evidence", "returned dict, not SurpriseEvidence"),
                                           ("ok-without-windows", "status ok with no window")])
def test_surprise_evidence_that_breaks_the_scorer_contract_is_an_ineligible_tool_fault(clip, broken, reason):
    """A NaN surprise was shown to the model as "nan" and the run scored; a window ending at frame 900 of 33 too;
    a dict ended as an internal AttributeError instead of the tool's fault, and "ok" without windows or mean as an
    internal TypeError (the trace's summary formatted the None mean)."""
    from tools.motion import LKTracker

    agent = build_reward_agent(AgentConfig(preset="full"),
                               backbone=Backbone(ScriptedChatModel(full_script()), retry_wait=(0.0, 0.0)),
                               tools=AgentTools(tracker=LKTracker(), surprise=BrokenSurprise(broken)),
                               checkpointer=InMemorySaver())
    out = agent.invoke({"video": str(clip), "instruction": "push the red block to the right", "run_id": "r"},
                       {"configurable": {"thread_id": "r"}})
    result = out["result"]
    assert result.reward is None and result.status == "ineligible", result.reasons
    assert any("surprise run: the scorer returned" in r and reason in r for r in result.reasons), result.reasons
