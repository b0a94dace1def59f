"""The motion summary's text names its axes: positions and shifts are image pixels from the top-left corner,
y growing downwards. Without that, "dy=-20.0" for a block lifted 20 px read as a move down to a model that
takes y as growing upwards (the usual plot convention), the opposite of what the tracks say."""

from __future__ import annotations

import numpy as np

from tools.motion import MotionTracks, summarize_tracks


def lifted_point() -> MotionTracks:
    """One point lifted 2 px per frame for 10 frames (y decreasing: upwards in the image)."""
    t = np.arange(11, dtype=np.float32)
    tracks = np.stack([np.full_like(t, 64.0), 100.0 - 2.0 * t], axis=1)[:, None, :]
    return MotionTracks(tracks=tracks, visible=np.ones((11, 1), bool), query_frames=np.zeros(1, np.int64))


def test_summary_text_says_which_way_y_grows():
    text = summarize_tracks(lifted_point(), (128, 128)).text()
    assert "dy=-20.0" in text, text  # the lift, in image coordinates
    assert "y grows downwards" in text, text  # ... and how to read its sign
