"""One check of a tracker's answer (`tools.motion.base.require_tracks`) serves the agent's track node, the grid
tracks of `tools.motion.grid` and the tool service: each had its own copy of the type and `tracks_problem`
check, with a different message for the same broken answer."""

from __future__ import annotations

import numpy as np
import pytest

from tools.motion import LKTracker, MotionTracks

SIZE = (48, 64)  # (height, width) of the frames the tracks are said to be on


def _tracks(t: int, n: int) -> MotionTracks:
    return MotionTracks(tracks=np.zeros((t, n, 2)), visible=np.ones((t, n), bool), query_frames=np.zeros(n, int))


def test_require_tracks_returns_good_tracks_and_names_what_is_wrong():
    from tools.motion.base import require_tracks

    good = _tracks(4, 2)
    assert require_tracks(good, 4, 2, frame_size=SIZE) is good and require_tracks(good, 4, None, frame_size=SIZE) is good
    with pytest.raises(ValueError, match=r"^the tracker returned NoneType for 4 frames$"):
        require_tracks(None, 4, 2, frame_size=SIZE)
    with pytest.raises(ValueError, match=r"^the tracker returned 3 points for 2 query points$"):
        require_tracks(_tracks(4, 3), 4, 2, frame_size=SIZE)
    with pytest.raises(ValueError, match=r"^the tracker returned 4 frames for 5 frames$"):
        require_tracks(good, 5, None, frame_size=SIZE)


class _ReturnsNone:
    def track(self, frames, *, grid_size=None, queries=None):
        return None


def test_window_grid_names_a_non_tracks_answer_as_the_agent_and_the_service_do():
    from tools.motion.grid import track_window_grid

    frames = np.zeros((5, 16, 16, 3), np.uint8)
    with pytest.raises(ValueError, match=r"^the tracker returned NoneType for 5 frames$"):
        track_window_grid(_ReturnsNone(), frames, 2)


def test_window_grid_of_a_good_tracker_passes_the_check():
    from tools.motion.grid import track_window_grid

    rng = np.random.default_rng(0)
    frames = np.repeat((rng.random((1, 32, 32, 3)) * 255).astype(np.uint8), 4, axis=0)
    tracks = track_window_grid(LKTracker(), frames, 4)
    assert tracks.num_frames == 4 and tracks.num_points == 16


@pytest.mark.parametrize(("x", "y"), [(1e30, 10.0), (10.0, -1e30), (64 * 11.0 + 1, 10.0), (10.0, -48 * 10.0 - 1)])
def test_positions_far_outside_the_frame_break_the_contract(x, y):
    """Finite but absurd positions (1e30 px) passed the check and came back as "inf" distances in the summary
    the model reads; a position more than `POSITION_BOUND_FRAMES` frame sizes past the image is the tracker's bug."""
    from tools.motion.base import require_tracks

    bad = _tracks(4, 2)
    bad.tracks[2, 1] = (x, y)
    with pytest.raises(ValueError, match=r"^the tracker returned positions far outside the 64x48 frame at 1 "
                                         r"point-frames \(first: point 1, frame 2"):
        require_tracks(bad, 4, 2, frame_size=SIZE)


def test_positions_off_the_frame_within_the_bound_keep_the_contract():
    """A point that left the image (a tracker extrapolating it a few frames' worth away) is not a bug."""
    from tools.motion.base import POSITION_BOUND_FRAMES, require_tracks

    ok = _tracks(4, 4)
    b = POSITION_BOUND_FRAMES
    ok.tracks[1] = [(-5.0, 3.0), (63.0 + 40.0, 47.0), (-b * 64.0, -b * 48.0), ((b + 1) * 64.0 - 1, (b + 1) * 48.0 - 1)]
    assert require_tracks(ok, 4, 4, frame_size=SIZE) is ok
