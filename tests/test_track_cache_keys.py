"""The motion-track job key and the overlay key hold what decides the track's content: the tracker (CoTracker3,
LK, a tool service, an injected object) and `track_short_side`, as the surprise key holds its short side.
Agents with different tool settings sharing one frame cache (`score_batch(frame_store=...)`) got another
setting's tracks: the key was only (clip version, frames, points, query frame)."""

from __future__ import annotations

from types import SimpleNamespace

from graph.context import AgentTools, ToolProvider, tool_provider
from graph.frame_store import FrameStore
from graph.nodes.tracking import _track_request
from tools.motion import LKTracker
from tools.settings import ToolSettings
from tools.toolbox import Toolbox


def _key(store: FrameStore, provider: ToolProvider, clip: str) -> tuple:
    ctx = SimpleNamespace(frames=store, tools=provider)
    return _track_request(ctx, clip, [0, 1], [])[0]


def test_track_keys_differ_by_track_short_side(tmp_path):
    clip = str(tmp_path / "c.mp4")
    store, tracker = FrameStore(), LKTracker()
    small = tool_provider(AgentTools(tracker=tracker, track_short_side=256))
    full = tool_provider(AgentTools(tracker=tracker, track_short_side=None))
    assert _key(store, small, clip) != _key(store, full, clip)
    assert _key(store, small, clip) == _key(store, tool_provider(AgentTools(tracker=tracker, track_short_side=256)), clip)


def test_track_keys_differ_by_tracker_backend(tmp_path):
    clip = str(tmp_path / "c.mp4")
    store = FrameStore()
    lk = tool_provider(Toolbox(ToolSettings(motion_backend="lk")))
    co = tool_provider(Toolbox(ToolSettings(motion_backend="cotracker3")))
    assert _key(store, lk, clip) != _key(store, co, clip)
    assert _key(store, lk, clip) == _key(store, tool_provider(Toolbox(ToolSettings(motion_backend="lk"))), clip)


def test_track_keys_differ_between_injected_trackers_and_the_clip_version_stays_in_slot_1(tmp_path):
    clip = str(tmp_path / "c.mp4")
    store = FrameStore()
    a, b = (tool_provider(AgentTools(tracker=t)) for t in (LKTracker(), SimpleNamespace(track=None)))
    assert _key(store, a, clip) != _key(store, b, clip)
    assert _key(store, a, clip)[1] == store.current(clip)  # FrameStore.forget finds the clip there


def test_an_injected_lk_tracker_and_the_lk_toolbox_share_tracks(tmp_path):
    clip = str(tmp_path / "c.mp4")
    store = FrameStore()
    assert (_key(store, tool_provider(AgentTools(tracker=LKTracker())), clip)
            == _key(store, tool_provider(Toolbox(ToolSettings(motion_backend="lk"))), clip))
