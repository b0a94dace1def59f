"""The agent's grid tracks are queried on several frames of the tracked stretch (first, middle, last), and
both trackers follow those points both ways: a grid on the first frame alone never tracked an object that
enters the view later (its points lie on the background there, which the object then occludes, so they
are lost) and the summary read "0 points moved" for a clip full of motion."""

from __future__ import annotations

import re

import cv2
import numpy as np
import pytest
from graph_scripts import full_script, make_agent, run, tool_call

from tools.motion import LKTracker, MotionTracks, summarize_tracks
from tools.video import write_video

SIZE = 128


def _texture(size: int, seed: int, sigma: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return cv2.GaussianBlur((rng.random((size, size)) * 255).astype(np.uint8), (0, 0), sigma)


def entering_square(frames: int = 33, enter: int = 14, speed: int = 5, side: int = 32) -> np.ndarray:
    """RGB ``[frames, 128, 128, 3]``: a static textured background; from frame ``enter`` on, a textured square
    slides in from the left edge at ``speed`` px per frame (absent before)."""
    bg = (_texture(SIZE, 2, 2.0) // 2 + 40).astype(np.uint8)
    square = _texture(side, 1, 1.0)
    out = []
    for t in range(frames):
        f = bg.copy()
        x = -side + speed * max(0, t - enter)
        lo, hi = max(0, x), min(SIZE, x + side)
        if hi > lo:
            f[48:48 + side, lo:hi] = square[:, lo - x:hi - x]
        out.append(f)
    return np.repeat(np.stack(out)[..., None], 3, axis=-1)


def window_grid_queries(grid_size: int, frames_shape: tuple[int, ...]) -> np.ndarray:
    """The all-at-once window grid (the oracle `grid_tracks` is compared with): ``[K*g*g, 3]`` queries
    ``(t, x, y)``, the ``grid_size`` grid on each of the `grid_query_frames`, the first frame's points first."""
    from tools.motion.base import grid_points
    from tools.motion.grid import grid_query_frames

    pts = grid_points(grid_size, int(frames_shape[1]), int(frames_shape[2]))
    return np.concatenate([np.concatenate([np.full((len(pts), 1), k, np.float32), pts], axis=1)
                           for k in grid_query_frames(int(frames_shape[0]))])


def _moved(text: str) -> int:
    return int(re.search(r"(\d+) points moved", text).group(1))


def test_grid_track_of_a_clip_sees_an_object_that_enters_later(tmp_path):
    clip = write_video(tmp_path / "enter.mp4", entering_square(), fps=16.0)
    script = full_script(inspect=[tool_call("track_motion", {"start_frame": 0, "end_frame": 32}), "done"])
    agent, _ = make_agent("full", script, tracker=LKTracker(), motion_prefetch="off")
    text = next(x for x in run(agent, clip)["exchanges"] if x.get("overlay"))["text"]
    assert _moved(text) >= 3, text
    assert "Motion in frames: none" not in text, text


def test_grid_queries_lie_on_the_first_middle_and_last_tracked_frames():
    from tools.motion.grid import grid_query_frames

    assert grid_query_frames(33) == [0, 16, 32]
    assert grid_query_frames(2) == [0, 1] and grid_query_frames(1) == [0]
    q = window_grid_queries(4, (33, 64, 96, 3))
    assert q.shape == (3 * 16, 3) and q.dtype == np.float32
    assert sorted(set(q[:, 0].tolist())) == [0.0, 16.0, 32.0]
    assert (q[:16, 0] == 0).all()  # the first frame's grid comes first (the points a grid_size track has)
    for k in (0, 16, 32):  # the same grid on each frame
        np.testing.assert_array_equal(q[q[:, 0] == k, 1:], q[:16, 1:])


def test_later_grid_points_where_earlier_tracks_still_are_are_dropped():
    """A static, fully tracked scene keeps exactly the first frame's grid; where the first frame's points were
    lost (the square entered over them) the later frames' points stay, and they carry the motion."""
    from tools.motion.grid import track_window_grid

    frames = entering_square()
    still = np.repeat(frames[:1], len(frames), axis=0)
    tracks = track_window_grid(LKTracker(), still, 8)
    assert tracks.num_points == 64 and (tracks.query_frames == 0).all()
    tracks = track_window_grid(LKTracker(), frames, 8)
    later = tracks.query_frames > 0
    assert 64 < tracks.num_points < 3 * 64 and later.any()
    summary = summarize_tracks(tracks, (SIZE, SIZE))
    assert summary.moving_points >= 3 and summary.active_segments, summary.text()
    moving = [t.index for t in summary.top_tracks]
    assert later[moving].all()  # the motion comes from the points queried after the square entered


def test_a_later_point_tracked_in_no_other_frame_is_dropped():
    from tools.motion.grid import drop_redundant

    t, n = 5, 3
    tracks = np.zeros((t, n, 2), np.float32)
    tracks[:, :, 0] = [[10, 50, 90]] * t
    visible = np.ones((t, n), bool)
    visible[:, 0] = False
    visible[0, 0] = True  # point 0 (frame 0) is lost after its query frame
    visible[:, 2] = False
    visible[4, 2] = True  # point 2 (frame 4) is seen only on its own frame: no evidence
    mt = MotionTracks(tracks=tracks, visible=visible, query_frames=np.array([0, 4, 4]))
    kept = drop_redundant(mt, radius=5.0)
    assert kept.num_points == 2 and kept.query_frames.tolist() == [0, 4]
    np.testing.assert_array_equal(kept.tracks[:, 1, 0], np.full(t, 50, np.float32))


def test_drop_redundant_refuses_a_bad_radius():
    from tools.motion.grid import drop_redundant

    mt = MotionTracks(tracks=np.zeros((2, 1, 2)), visible=np.ones((2, 1), bool), query_frames=np.array([0]))
    with pytest.raises(ValueError, match="radius"):
        drop_redundant(mt, radius=0.0)


class _RecordingPredictor:
    """CoTrackerPredictor stand-in: points stay at their queries, visible on their query frame and the next
    one only (so each later grid finds its cells uncovered); records what it was asked."""

    interp_shape = (SIZE, SIZE)  # the clip's size: the queries reach it unscaled

    def __init__(self) -> None:
        self.calls: list[tuple[np.ndarray, bool]] = []

    def __call__(self, video, queries, backward_tracking):
        import torch

        self.calls.append((queries[0].cpu().numpy(), backward_tracking))
        b, t = video.shape[:2]
        tracks = queries[:, None, :, 1:].repeat(1, t, 1, 1).clone()
        frame = torch.arange(t)[None, :, None]
        qf = queries[:, None, :, 0].long()
        return tracks, (frame >= qf) & (frame <= qf + 1)


class _CountingTracker:
    """An LKTracker that records how many points each call tracks."""

    def __init__(self) -> None:
        self.inner, self.calls = LKTracker(), []

    def track(self, frames, queries=None, grid_size=None):
        self.calls.append(len(queries))
        return self.inner.track(frames, queries=queries)


def test_later_grids_are_tracked_only_where_they_add_coverage():
    """Querying all three grids at once made the agent's grid track about four times dearer: a still scene
    now costs one track of the first grid, and a scene with an entering object tracks only the later cells
    no earlier point covers, with the same tracks as the all-at-once grid then dropping redundant points."""
    from tools.motion.grid import drop_redundant, grid_radius, track_window_grid

    frames = entering_square()
    still = np.repeat(frames[:1], len(frames), axis=0)
    counting = _CountingTracker()
    track_window_grid(counting, still, 8)
    assert counting.calls == [64]
    counting = _CountingTracker()
    tracks = track_window_grid(counting, frames, 8)
    assert len(counting.calls) == 2 and counting.calls[0] == 64 and sum(counting.calls) < 3 * 64
    whole = drop_redundant(LKTracker().track(frames, queries=window_grid_queries(8, frames.shape)),
                           grid_radius(8, SIZE, SIZE))
    np.testing.assert_array_equal(tracks.query_frames, whole.query_frames)
    np.testing.assert_array_equal(tracks.visible, whole.visible)
    np.testing.assert_allclose(tracks.tracks, whole.tracks, atol=1e-4)


def test_cotracker3_gets_the_later_grid_points_with_backward_tracking():
    pytest.importorskip("torch")
    from tools.motion import CoTracker3Tracker
    from tools.motion.grid import track_window_grid

    predictor = _RecordingPredictor()
    tracks = track_window_grid(CoTracker3Tracker(predictor=predictor), entering_square(frames=9), 4)
    assert all(backward for _, backward in predictor.calls)  # later points are followed back to the first
    assert [sorted(set(q[:, 0].tolist())) for q, _ in predictor.calls] == [[0.0], [4.0, 8.0]]
    assert [len(q) for q, _ in predictor.calls] == [16, 32]  # both later grids found their cells uncovered
    assert tracks.num_points == 32  # frame 8's points are tracked on no other frame: dropped


def test_coverage_is_a_seen_point_strictly_within_the_radius():
    """`covered` is the one rule both `grid_tracks` (which later cells to ask for) and `drop_redundant` (which
    later points to drop) apply: a point is covered when some seen point lies closer than ``radius``."""
    from tools.motion.grid import covered

    pts = np.float32([[0, 0], [10, 0], [20, 0]])
    seen = np.float32([[0, 3], [14, 0]])
    assert covered(pts, seen, 4.0).tolist() == [True, False, False]  # 3 and 4 px away: 4 is not under 4
    assert covered(pts, seen, 4.5).tolist() == [True, True, False]
    assert covered(pts, seen, 6.5).tolist() == [True, True, True]
    assert covered(pts, np.zeros((0, 2), np.float32), 100.0).tolist() == [False, False, False]
    assert covered(np.zeros((0, 2), np.float32), seen, 4.0).shape == (0,)
