"""The trackers' refusals of bad input: frames of the wrong shape, query points outside the frame or the clip,
grids finer than the frame; each names what it refused (split from tests/test_motion.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tools.motion import LKTracker, TrackQueryError
from tools.motion.base import in_bounds


def three_frames() -> np.ndarray:
    """A 3-frame 128x128 clip: these refusals come before any tracking, so its content does not matter."""
    return np.random.default_rng(0).integers(0, 255, (3, 128, 128, 3), dtype=np.uint8)


@pytest.mark.parametrize("frames", [np.zeros((0, 32, 32, 3), np.uint8), np.zeros((4, 32, 32), np.uint8),
                                    np.zeros((4, 32, 32, 3), np.float32)])
def test_bad_frames_are_rejected(frames):
    with pytest.raises(ValueError):
        LKTracker().track(frames, grid_size=2)


def test_points_outside_the_frame_are_named():
    frames = three_frames()
    with pytest.raises(TrackQueryError, match=r"rows \[1, 2\].*outside"):
        LKTracker().track(frames, queries=np.array([[0, 5, 5], [0, -1, 5], [0, 5, 200]], float))


def test_a_refused_query_quotes_its_values_as_plain_numbers():
    # the message reaches the model (an invalid track_motion call) and the tool service's 400: numpy 2's
    # repr ("np.float64(200.0)") is noise there
    frames = three_frames()
    with pytest.raises(TrackQueryError) as point:
        LKTracker().track(frames, queries=np.array([[0, 5, 200]], float))
    with pytest.raises(TrackQueryError) as frame:
        LKTracker().track(frames, queries=np.array([[7, 5, 5]], float))
    assert "got [(5.0, 200.0)])" in str(point.value) and "got [7.0])" in str(frame.value)


def test_queries_beyond_the_clip_are_named():
    frames = three_frames()
    with pytest.raises(TrackQueryError, match=r"rows \[1\].*outside the clip"):
        LKTracker().track(frames, queries=np.array([[0, 5, 5], [3, 5, 5]], float))
    with pytest.raises(TrackQueryError, match="whole numbers"):
        LKTracker().track(frames, queries=np.array([[0.5, 5, 5]], float))
    with pytest.raises(TrackQueryError, match="exactly one"):
        LKTracker().track(frames)
    with pytest.raises(TrackQueryError, match="grid_size"):
        LKTracker().track(frames, grid_size=0)


def test_a_grid_finer_than_the_frame_is_refused_like_queries_outside_it():
    """grid 16 on 8x8 frames put 60 points outside the image (x = -0.25), tracked as visible; the same points
    given as queries are refused."""
    small = np.zeros((3, 8, 12, 3), np.uint8)
    with pytest.raises(TrackQueryError, match="grid_size 9 is finer than the 12x8 frame: at most 8"):
        LKTracker().track(small, grid_size=9)
    tr = LKTracker().track(small, grid_size=8)
    assert in_bounds(tr.tracks[0], 8, 12).all()
