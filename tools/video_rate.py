"""The frame rates a video file can store, without importing PyAV (the training config checks ``fps`` with it
before anything heavy loads; ``tools.video_write`` encodes with it).

The writer stores a rate as the nearest fraction with a denominator up to `MAX_RATE_DENOMINATOR`, and the
stream's rate and time base as 32-bit integers: ``fps`` at or below 1/2002 rounded to the rate 0 (which libx264
replaced by 24 fps: a clip at the wrong rate), and one of 2**31 or more overflowed in PyAV (an OverflowError).
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction

MAX_RATE_DENOMINATOR = 1001
"""Largest denominator of a stored rate (1001: the NTSC rates such as 30000/1001)."""

MAX_RATE_INT = 2**31 - 1
"""Largest numerator / denominator the container's rate and time base hold (a signed 32-bit integer)."""


def stored_rate(fps: float) -> Fraction | None:
    """The rate a video of ``fps`` frames per second is stored with, or None when it cannot be stored (not
    finite, at or below 1/2002, 2**31 or more)."""
    if not (isinstance(fps, numbers.Real) and math.isfinite(fps) and fps > 0):
        return None
    rate = Fraction(float(fps)).limit_denominator(MAX_RATE_DENOMINATOR)
    return rate if 0 < rate and rate.numerator <= MAX_RATE_INT else None


def fps_problem(fps: float) -> str | None:
    """Why ``fps`` cannot be stored in a video file (a sentence naming the limits), or None."""
    if stored_rate(fps) is not None:
        return None
    return (f"fps must be above 1/{2 * MAX_RATE_DENOMINATOR} and below 2**31 (what an mp4 stores: the rate is kept "
            f"as the nearest fraction with a denominator up to {MAX_RATE_DENOMINATOR}, in 32-bit integers), got {fps}")
