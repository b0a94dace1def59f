"""Motion summaries judge speed per clip frame, so the verdict does not depend on how densely a
stretch was tracked (graph.nodes.tracking.track_frames: at most 32 frames, gaps of 1 to 10 clip frames)."""

from __future__ import annotations

import numpy as np

from graph.nodes.tracking import track_frames
from tools.motion import MotionTracks, summarize_tracks

SIZE = (512, 512)


def steady(frame_indices: list[int], speed: float) -> MotionTracks:
    """Four points moving right at `speed` px per clip frame, tracked on `frame_indices`."""
    idx = np.array(frame_indices)
    xs = np.array([100.0, 200.0, 300.0, 400.0])[None] + speed * (idx[:, None] - idx[0])
    tracks = np.stack([xs, np.full_like(xs, 256.0)], -1)
    return MotionTracks(tracks=tracks, visible=np.ones(tracks.shape[:2], bool), query_frames=np.zeros(4, int),
                        frame_indices=list(frame_indices))


def test_same_speed_same_verdict_at_every_frame_spacing():
    """1 px per clip frame tracked at every frame (a 32-frame stretch) read '0 points moved, Motion in
    frames: none' with the old 2.9 px per-step threshold, but 'moving' over a 100-frame stretch."""
    dense, sparse = (summarize_tracks(steady(track_frames(300, 0, end), 1.0), SIZE) for end in (31, 99))
    assert dense.moving_points == sparse.moving_points == 4
    assert dense.active_segments == [(1, 31)] and sparse.active_segments == [(3, 99)]
    slow = [summarize_tracks(steady(track_frames(300, 0, end), 0.3), SIZE, net_threshold=1e9) for end in (31, 99, 299)]
    assert [s.moving_points for s in slow] == [0, 0, 0]  # below the speed threshold at every spacing


def test_uneven_spacing_does_not_split_steady_motion():
    """Rounded linspace alternates gaps of 3 and 4 clip frames: steady 0.85 px/frame motion was one-frame
    segments (only the 4-frame steps passed the per-step threshold); it is one segment."""
    idx = track_frames(300, 0, 108)
    assert set(np.diff(idx).tolist()) == {3, 4}
    s = summarize_tracks(steady(idx, 0.85), SIZE)
    assert s.active_segments == [(idx[1], idx[-1])] and s.moving_points == 4


def test_text_states_the_speed_unit():
    text = summarize_tracks(steady(list(range(32)), 1.0), SIZE).text()
    first = text.splitlines()[0]
    assert "4 points moved (speed > 0.72 px/frame over more than 2.5 px, or net > 14 px;" in first, first


def test_slow_motion_counts_by_net_displacement():
    """A push slower than the speed threshold at every step still ends far from where it began: it moved,
    without moving frames; tracker jitter of a static point does not."""
    tr = steady(list(range(32)), 0.6)  # 18.6 px over the stretch, 0.6 < 0.72 px/frame
    s = summarize_tracks(tr, SIZE)
    assert s.active_segments == [] and s.moving_points == 4
    assert s.top_tracks and s.top_tracks[0].motion_frames == []
    assert "slow, no frame above the speed threshold" in s.text()
    rng = np.random.default_rng(0)
    still = steady(list(range(32)), 0.0)
    still.tracks += rng.normal(0, 0.1, still.tracks.shape).astype(np.float32)  # measured LK jitter is < 0.3 px
    assert summarize_tracks(still, SIZE).moving_points == 0


def test_frame_gaps_never_divide_by_zero():
    from tools.motion.steps import frame_gaps

    assert frame_gaps([5, 5, 8, 6]).tolist() == [1, 3, 2]


def test_net_displacement_runs_in_clip_order_for_a_late_query():
    """Points queried on the last tracked frame (track_motion with end_frame < start_frame) read 0 px of
    net displacement when it was measured from the query position."""
    tr = steady(list(range(32)), 1.0)
    tr.query_frames[:] = 31
    s = summarize_tracks(tr, SIZE)
    assert s.top_tracks[0].displacement_px == 31.0 and s.top_tracks[0].start == (100.0, 256.0)
    assert s.top_tracks[0].end == (131.0, 256.0)
    tr.visible[:3, 0] = False  # first tracked frame of point 0 is frame 3
    assert summarize_tracks(tr, SIZE).regions[3].median_displacement_px == 28.0  # 'left': point 0 alone
