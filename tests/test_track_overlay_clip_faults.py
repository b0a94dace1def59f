"""A read of the clip that fails while track_motion draws its overlays (the full-size frames shown) is the clip's video
fault, as anywhere else in the agent: it was raised inside the overlays' catch-all and recorded as the motion tool's
outage ("tool": motion run failure), so `--retry-ineligible` scored a clip that cannot be decoded again on every run."""

from __future__ import annotations

import asyncio

import pytest
from graph_scripts import moving_square
from test_track_sizes import StillTracker


def test_a_clip_read_error_while_drawing_overlays_stays_the_clips(tmp_path, monkeypatch):
    from graph import AgentConfig
    from graph.backbone import Backbone
    from graph.context import RunContext, ToolProvider
    from graph.frame_store import FrameStore
    from graph.nodes.common import to_fault
    from graph.nodes.tracking import track_overlays
    from graph.testing import ScriptedChatModel
    from tools.errors import ToolFault
    from tools.video import VideoDecodeError

    clip = str(moving_square(tmp_path / "square.mp4"))
    tracker = StillTracker()
    ctx = RunContext(backbone=Backbone(ScriptedChatModel({})), config=AgentConfig().resolved(),
                     frames=FrameStore(), tools=ToolProvider(lambda: tracker))
    meta = ctx.frames.meta(clip)
    state = {"video": clip, "meta": {"frames": meta.frames, "width": meta.width, "height": meta.height}}

    def cut(video, indices):
        raise VideoDecodeError(f"{video}: cannot decode frame {indices[0]}: Invalid data found when processing input")

    monkeypatch.setattr(ctx.frames, "frame_list", cut)
    with pytest.raises(VideoDecodeError) as caught:
        asyncio.run(track_overlays(state, ctx, [0, 8, 16], [[0.5, 0.5]], [8]))
    assert not isinstance(caught.value, ToolFault) and tracker.shapes  # tracked, then the overlay's read failed
    fault = to_fault("inspect", caught.value)
    assert fault.kind == "video" and "cannot decode frame 8" in fault.message, fault
    assert not fault.outage  # final while the clip is unchanged: not an outage a rerun could fix


def test_a_tracker_answer_the_overlays_cannot_draw_is_still_the_tools_fault(tmp_path, monkeypatch):
    """What the overlays' own work raises stays ToolFault("motion", "run") (a custom tracker's tracks of a wrong
    shape): only the clip's read is taken out of it."""
    from graph import AgentConfig
    from graph.backbone import Backbone
    from graph.context import RunContext, ToolProvider
    from graph.frame_store import FrameStore
    from graph.nodes import tracking
    from graph.testing import ScriptedChatModel
    from tools.errors import ToolFault

    clip = str(moving_square(tmp_path / "square.mp4"))
    ctx = RunContext(backbone=Backbone(ScriptedChatModel({})), config=AgentConfig().resolved(),
                     frames=FrameStore(), tools=ToolProvider(StillTracker))
    meta = ctx.frames.meta(clip)
    state = {"video": clip, "meta": {"frames": meta.frames, "width": meta.width, "height": meta.height}}

    def broken(*args, **kwargs):
        raise IndexError("track 3 has no frame 8")

    monkeypatch.setattr("tools.motion.draw_tracks_resized", broken)
    with pytest.raises(ToolFault, match=r"motion tool run failure: IndexError: track 3 has no frame 8"):
        asyncio.run(tracking.track_overlays(state, ctx, [0, 8, 16], [[0.5, 0.5]], [8]))

