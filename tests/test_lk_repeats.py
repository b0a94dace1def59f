"""LK makes no OpenCV work twice that it can make once, with the same numbers (tools/motion/lk.py): a
forward-direction check over a frame pair the backward chain steps over rides in that chain's call, and a grid
track's second call on the same (read-only) frames reuses the first call's grey frames. The tracks must stay
bit for bit those of the plain step-by-step algorithm and of two independent calls."""

from __future__ import annotations

import cv2
import numpy as np
from test_grid_query_frames import entering_square

import tools.motion.lk as lk
from tests.test_motion import _reference_lk, moving_square
from tools.motion import LKTracker
from tools.motion.grid import grid_tracks


def _recording(monkeypatch) -> tuple[list[list[np.ndarray]], list[tuple[int, int, int, int]]]:
    """Patches `lk._grays` and ``cv2.calcOpticalFlowPyrLK`` to record the grey frames of each call and each LK
    call as ``(frame of img0, frame of img1, flags, points)`` (frames found by identity in the latest grey list)."""
    grays_made: list[list[np.ndarray]] = []
    calls: list[tuple[int, int, int, int]] = []
    real_grays, real_lk = lk._grays, cv2.calcOpticalFlowPyrLK

    def grays(frames):
        out = real_grays(frames)
        grays_made.append(out)
        return out

    def flow(img0, img1, pts, nxt, **kw):
        index = {id(g): i for i, g in enumerate(grays_made[-1])}
        calls.append((index[id(img0)], index[id(img1)], kw.get("flags", 0), len(pts)))  # list.append: thread-safe
        return real_lk(img0, img1, pts, nxt, **kw)

    monkeypatch.setattr(lk, "_grays", grays)
    monkeypatch.setattr(cv2, "calcOpticalFlowPyrLK", flow)
    return grays_made, calls


def test_forward_checks_ride_in_the_backward_chain_calls(monkeypatch):
    """Points queried on the first and the last frame: the backward chain steps over every pair (t + 1, t) that
    the forward checks go over, so each such pair has one plain call (on main: two, the chain's and the
    check's); the tracks still equal the step-by-step algorithm's, rejections included."""
    rng = np.random.default_rng(5)
    frames = moving_square(t_total=14, vx=3, vy=1, x0=25, y0=30).copy()
    frames[::3] = np.clip(frames[::3].astype(int) + rng.integers(-30, 30, frames[::3].shape), 0, 255)
    t_total = len(frames)
    qf = np.array([0] * 12 + [t_total - 1] * 12)
    queries = np.column_stack([qf, rng.uniform(0, 127, len(qf)), rng.uniform(0, 127, len(qf))])
    tracker = LKTracker()
    want_tracks, want_visible = _reference_lk(tracker, frames, queries)
    _, calls = _recording(monkeypatch)
    got = tracker.track(frames, queries=queries)
    plain = [(a, b) for a, b, flags, _ in calls if flags == 0]
    for t in range(t_total - 1):
        assert plain.count((t + 1, t)) == 1, (t, plain.count((t + 1, t)))
        assert plain.count((t, t + 1)) == 2  # the forward chain's step and the backward chain's check
    assert 0 < got.visible.mean() < 1
    np.testing.assert_array_equal(got.visible, want_visible)
    np.testing.assert_array_equal(got.tracks, want_tracks)


def test_a_grid_tracks_second_call_reuses_the_grey_frames(monkeypatch):
    """The agent's grid track on read-only frames with an entering object (two calls): one grey conversion,
    the same tracks as two calls of separate trackers on writeable frames."""
    frames = entering_square()
    want = grid_tracks(lambda q: LKTracker().track(frames.copy(), queries=q), frames.shape, 8)
    grays_made, _ = _recording(monkeypatch)
    frozen = frames.copy()
    frozen.flags.writeable = False
    tracker = LKTracker()
    asked = []

    def track(queries):
        asked.append(len(queries))
        return tracker.track(frozen, queries=queries)

    got = grid_tracks(track, frozen.shape, 8)
    assert len(asked) == 2  # the later frames' grid was asked for: a second call
    assert len(grays_made) == 1
    frozen = None  # the last reference (the closure reads the same variable)
    assert tracker._last_grays is None  # the frames are gone: their grey frames are not kept
    np.testing.assert_array_equal(got.query_frames, want.query_frames)
    np.testing.assert_array_equal(got.visible, want.visible)
    np.testing.assert_array_equal(got.tracks, want.tracks)


def test_frames_that_may_have_changed_are_converted_anew(monkeypatch):
    """Reuse needs the same read-only frames owning their memory: writeable frames changed in place, or a
    read-only view of writeable frames, are converted again (and give the new frames' tracks)."""
    first, second = moving_square(t_total=8), moving_square(t_total=8, vx=-2, x0=60)
    queries = np.array([[0, 64.0, 64.0], [0, 30.0, 50.0], [7, 40.0, 40.0]])
    want = LKTracker().track(second, queries=queries)
    grays_made, _ = _recording(monkeypatch)
    for make in (lambda a: a, lambda a: a.view()):
        base = first.copy()
        frames = make(base)
        frames.flags.writeable = frames is base
        tracker = LKTracker()
        tracker.track(frames, queries=queries)
        base[:] = second
        got = tracker.track(frames, queries=queries)
        np.testing.assert_array_equal(got.tracks, want.tracks)
        np.testing.assert_array_equal(got.visible, want.visible)
    assert len(grays_made) == 4
    assert lk._frozen(np.zeros((2, 2, 2, 3), np.uint8)) is False
    owned = np.zeros((2, 2, 2, 3), np.uint8)
    owned.flags.writeable = False
    assert lk._frozen(owned) and lk._frozen(owned.view())


def test_cotracker3_takes_read_only_frames_without_a_warning():
    """The agent now hands its tracker read-only frames; torch warns of a tensor over read-only memory."""
    import warnings

    import pytest

    pytest.importorskip("torch")
    from test_grid_query_frames import _RecordingPredictor

    from tools.motion import CoTracker3Tracker

    frames = entering_square(frames=5)
    frames.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tracks = CoTracker3Tracker(predictor=_RecordingPredictor()).track(frames, grid_size=2)
    assert tracks.num_points == 4


def test_only_a_bytes_owner_counts_as_frozen_among_foreign_buffers():
    """A read-only view of ``bytes`` (the tool service's .npy body) cannot change; one of a bytearray or of a
    memoryview can (through the buffer's owner), so its grey frames are not kept."""
    frozen = np.frombuffer(bytes(24), np.uint8).reshape(2, 2, 2, 3)
    assert not frozen.flags.writeable and lk._frozen(frozen)
    for buffer in (bytearray(24), memoryview(bytearray(24)), memoryview(bytes(24))):
        view = np.frombuffer(buffer, np.uint8).reshape(2, 2, 2, 3)
        view.flags.writeable = False
        assert not lk._frozen(view), type(buffer)
