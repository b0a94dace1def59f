"""Motion evidence: point tracks (CoTracker3 or Lucas-Kanade), summaries for the agent, overlays."""

from __future__ import annotations

from typing import Any, Literal

from tools.motion.base import MotionTracker, MotionTracks, TrackQueryError
from tools.motion.cotracker import CoTracker3Tracker
from tools.motion.lk import LKConfig, LKTracker
from tools.motion.overlay import draw_tracks, draw_tracks_resized
from tools.motion.summary import MotionSummary, summarize_tracks

__all__ = ["MotionTracks", "MotionTracker", "TrackQueryError", "LKTracker", "LKConfig", "CoTracker3Tracker",
           "build_tracker", "summarize_tracks", "MotionSummary", "draw_tracks", "draw_tracks_resized"]


def build_tracker(backend: Literal["lk", "cotracker3"], **opts: Any) -> MotionTracker:
    """Build the configured tracker. ``opts`` go to the backend (LK: ``config``; CoTracker3: ``checkpoint``,
    ``hub_dir``, ``device``, ``interp_shape``, ``allow_random_weights``). Unknown backends raise ValueError."""
    if backend == "lk":
        return LKTracker(**opts)
    if backend == "cotracker3":
        return CoTracker3Tracker(**opts)
    raise ValueError(f"unknown motion backend {backend!r} (expected 'lk' or 'cotracker3')")
