"""Motion evidence at the sizes the model sees: track overlays drawn on the frames as sent, tracking on
frames with a bounded short side (tracks mapped back to the clip's pixels), and motion summaries in pixels
of the frames as sent."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from graph_scripts import FakeSurprise, full_script, moving_square, tool_call

from tools.video import write_video


# ------------------------------------------------------------------ overlays at the shown size
def test_draw_tracks_scales_track_coordinates_onto_resized_frames():
    from tools.motion import MotionTracks, draw_tracks

    tracks = MotionTracks(tracks=np.array([[[101.0, 41.0]]], np.float32), visible=np.ones((1, 1), bool),
                          query_frames=np.zeros(1, np.int64))
    small = np.zeros((1, 60, 80, 3), np.uint8)
    drawn = draw_tracks(small, tracks, scale=(0.5, 0.5))[0]
    # (101 + 0.5) * 0.5 - 0.5 = 50.25 -> x 50; (41 + 0.5) * 0.5 - 0.5 = 20.25 -> y 20
    ys, xs = np.nonzero(drawn.max(axis=2))
    assert (round(xs.mean()), round(ys.mean())) == (50, 20)
    moved = MotionTracks(tracks=np.array([[[50.0, 20.0]]], np.float32), visible=np.ones((1, 1), bool),
                         query_frames=np.zeros(1, np.int64))
    assert np.array_equal(drawn, draw_tracks(small, moved)[0])  # the same as tracks given at that size
    with pytest.raises(ValueError, match="scale must be two positive factors"):
        draw_tracks(small, tracks, scale=(0.0, 1.0))
    from tools.motion import draw_tracks_resized

    assert np.array_equal(draw_tracks_resized([small[0]], tracks, [0], (120, 160))[0], drawn)
    with pytest.raises(ValueError, match="1 shown frames for 2 positions"):
        draw_tracks_resized([small[0]], tracks, [0, 0], (120, 160))


def _images_sent(model, marker: str) -> list[np.ndarray]:
    """Decoded images whose text label (the block before the image) contains `marker`."""
    import base64

    out = []
    for call in model.calls:
        for message in call.messages:
            blocks = message.content if isinstance(message.content, list) else []
            for before, block in zip(blocks, blocks[1:], strict=False):
                if (isinstance(before, dict) and marker in before.get("text", "")
                        and isinstance(block, dict) and block.get("type") == "image_url"):
                    data = base64.b64decode(block["image_url"]["url"].split(",", 1)[1])
                    out.append(cv2.cvtColor(cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR),
                                            cv2.COLOR_BGR2RGB))
    return out


def test_agent_track_overlays_stay_visible_when_frames_are_sent_smaller(tmp_path):
    """A 512x512 clip sent at 128 pixels: the overlay must differ from the plain frame by the drawn
    dots and lines (drawn at 512 and shrunk 4x, they all but vanished)."""
    from langgraph.checkpoint.memory import InMemorySaver

    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.frame_store import FrameStore
    from graph.testing import ScriptedChatModel
    from tools.motion import LKTracker

    rng = np.random.default_rng(3)
    tex = cv2.GaussianBlur(rng.integers(0, 255, (512, 640), np.uint8), (0, 0), 6)
    frames = np.stack([np.repeat(tex[:, 2 * t:2 * t + 512, None], 3, -1) for t in range(33)])
    clip = write_video(tmp_path / "big.mp4", frames, fps=16.0)
    script = full_script(inspect=[tool_call("track_motion", {"start_frame": 0, "end_frame": 32}), "Tracks seen."])
    model = ScriptedChatModel(script)
    agent = build_reward_agent(AgentConfig(preset="full"),
                               backbone=Backbone(model, max_retries=1, retry_wait=(0.0, 0.0)),
                               tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()),
                               checkpointer=InMemorySaver(), frame_store=FrameStore(long_side=128))
    out = agent.invoke({"video": str(clip), "instruction": "push the red block to the right", "run_id": "r"},
                       {"configurable": {"thread_id": "r"}})
    assert out["result"].status == "scored"
    overlays = _images_sent(model, "(motion-track overlay)")
    assert overlays and all(o.shape == (128, 128, 3) for o in overlays)
    shown = next(x for x in out["exchanges"] if x.get("overlay"))["frames"]
    plain = [cv2.resize(frames[i], (128, 128), interpolation=cv2.INTER_AREA) for i in shown]
    changed = [float((np.abs(o.astype(np.int16) - f).max(axis=2) > 60).mean())
               for o, f in zip(overlays[:len(shown)], plain, strict=True)]
    assert min(changed) > 0.01, changed  # 2-5% here; drawn at 512 and shrunk to 128: 0.0


# ------------------------------------------------------------------ tracking at a bounded size
class StillTracker:
    """MotionTracker fake: every point stays where it was asked for; keeps the frame shapes it gets."""

    def __init__(self) -> None:
        self.shapes: list[tuple[int, ...]] = []

    def track(self, frames, *, grid_size=None, queries=None):
        from tools.motion import MotionTracks
        from tools.motion.base import resolve_queries

        self.shapes.append(tuple(frames.shape))
        q = resolve_queries(frames.shape, grid_size, queries)
        t = len(frames)
        return MotionTracks(tracks=np.repeat(q[None, :, 1:3], t, 0), visible=np.ones((t, len(q)), bool),
                            query_frames=q[:, 0].astype(np.int64))


def test_motion_tracks_rescaled_keeps_pixel_centres():
    from tools.motion import MotionTracks

    tracks = MotionTracks(tracks=np.array([[[101.0, 41.0], [-0.5, 0.0]]], np.float32),
                          visible=np.array([[True, False]]), query_frames=np.zeros(2, np.int64))
    half = tracks.rescaled(0.5, 0.25)
    assert half.tracks.tolist() == [[[50.25, 9.875], [-0.5, -0.375]]]  # (x + .5) * s - .5
    assert half.visible.tolist() == [[True, False]] and half.frame_indices == [0]
    assert np.allclose(half.rescaled(2.0, 4.0).tracks, tracks.tracks)
    with pytest.raises(ValueError, match="scale factors must be positive"):
        tracks.rescaled(0.0, 1.0)


def test_tracks_computed_on_smaller_frames_come_back_in_the_clips_pixels(tmp_path):
    from graph import AgentConfig
    from graph.backbone import Backbone
    from graph.context import RunContext, ToolProvider
    from graph.frame_store import FrameStore
    from graph.nodes.tracking import _compute_tracks
    from graph.testing import ScriptedChatModel

    clip = str(moving_square(tmp_path / "square.mp4"))  # 128x128
    tracker = StillTracker()

    def ctx(short_side):
        return RunContext(backbone=Backbone(ScriptedChatModel({})), config=AgentConfig().resolved(),
                          frames=FrameStore(), tools=ToolProvider(lambda: tracker, track_short_side=short_side))

    small = _compute_tracks(ctx(64), clip, [0, 8, 16], [[0.5, 0.5], [0.0, 1.0]])
    full = _compute_tracks(ctx(None), clip, [0, 8, 16], [[0.5, 0.5], [0.0, 1.0]])
    assert tracker.shapes == [(3, 64, 64, 3), (3, 128, 128, 3)]
    # the centre (31.5 of 0..63) maps to 63.5 of 0..127; the bottom-left pixel (0, 63) covers 0..1 x 126..127
    assert small.tracks[0].tolist() == [[63.5, 63.5], [0.5, 126.5]]
    assert full.tracks[0].tolist() == [[63.5, 63.5], [0.0, 127.0]]
    grid = _compute_tracks(ctx(64), clip, [0, 8], [])
    assert grid.num_points == 64 and grid.tracks.max() <= 127.5 and tracker.shapes[-1] == (2, 64, 64, 3)


def test_agent_tracks_on_frames_at_the_configured_short_side(tmp_path):
    from langgraph.checkpoint.memory import InMemorySaver

    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.testing import ScriptedChatModel

    clip = moving_square(tmp_path / "square.mp4")
    tracker = StillTracker()
    script = full_script(inspect=[tool_call("track_motion", {"start_frame": 0, "end_frame": 32}), "Tracks seen."])
    agent = build_reward_agent(AgentConfig(preset="full"),
                               backbone=Backbone(ScriptedChatModel(script), max_retries=1, retry_wait=(0.0, 0.0)),
                               tools=AgentTools(tracker=tracker, surprise=FakeSurprise(), track_short_side=64),
                               checkpointer=InMemorySaver())
    out = agent.invoke({"video": str(clip), "instruction": "push the red block to the right", "run_id": "r"},
                       {"configurable": {"thread_id": "r"}})
    assert out["result"].status == "scored"
    assert tracker.shapes and all(s[1:] == (64, 64, 3) for s in tracker.shapes)


def test_motion_summary_is_in_pixels_of_the_frames_as_sent(tmp_path):
    """The same clip sent at 256 and at 128 pixels: the summary states the size the model sees and its
    positions scale with it; which points moved does not change (the speed threshold is a share of the
    diagonal, and the square's steps, ~3 and ~7 px, are above the 2.5 px noise floor at both sizes)."""
    import re

    from langgraph.checkpoint.memory import InMemorySaver

    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.frame_store import FrameStore
    from graph.testing import ScriptedChatModel
    from tools.motion import LKTracker

    clip = moving_square(tmp_path / "square.mp4", size=256)  # a square moving right
    script = full_script(inspect=[tool_call("track_motion", {"start_frame": 0, "end_frame": 32}), "Seen."])

    def summary(long_side: int) -> str:
        agent = build_reward_agent(AgentConfig(preset="full", coordinates="pixels"),
                                   backbone=Backbone(ScriptedChatModel(script), retry_wait=(0.0, 0.0)),
                                   tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()),
                                   checkpointer=InMemorySaver(), frame_store=FrameStore(long_side=long_side))
        out = agent.invoke({"video": str(clip), "instruction": "push the red block to the right", "run_id": "r"},
                           {"configurable": {"thread_id": "r"}})
        return next(x for x in out["exchanges"] if x.get("overlay"))["text"]

    full, half = summary(512), summary(128)
    assert "over 32 frames (256x256)" in full and "over 32 frames (128x128)" in half
    moved = [re.search(r"(\d+) points moved", t).group(1) for t in (full, half)]
    assert moved[0] == moved[1] and int(moved[0]) > 0
    ends = [[float(v) for v in re.search(r"-> \(([-\d.]+),([-\d.]+)\)", t).groups()] for t in (full, half)]
    assert abs(ends[0][0] / 2 - ends[1][0]) <= 1 and abs(ends[0][1] / 2 - ends[1][1]) <= 1, (full, half)
