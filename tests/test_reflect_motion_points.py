"""Reflect's automatic grid track (motion on, inspection off) records the number of points it tracked.

The grid is queried on several frames of the stretch and the later points that add coverage are kept
(`tools.motion.grid`), so a grid track holds between GRID_SIZE**2 and GRID_QUERY_FRAMES times that many
points; `MotionEvidence.points` said GRID_SIZE**2 whatever was tracked."""

from __future__ import annotations

import re

import numpy as np
from graph_scripts import make_agent, run

from graph.nodes.tracking import GRID_SIZE
from tools.motion import MotionTracks


class ShortLivedTracker:
    """Every point is tracked on its query frame and the one after (or before, at the last frame) only, and
    does not move: no earlier point is visible where a later one lies, so every later grid point adds
    coverage and is kept."""

    def track(self, frames, *, grid_size=None, queries=None):
        t = len(frames)
        q = np.asarray(queries, dtype=np.float32)
        qf = q[:, 0].astype(np.int64)
        tracks = np.repeat(q[None, :, 1:], t, axis=0)
        visible = np.zeros((t, len(q)), bool)
        visible[qf, np.arange(len(q))] = True
        visible[np.where(qf + 1 < t, qf + 1, qf - 1), np.arange(len(q))] = True
        return MotionTracks(tracks=tracks, visible=visible, query_frames=qf)


def test_auto_grid_records_the_points_tracked(clip) -> None:
    agent, _ = make_agent("no_visual_verify", tracker=ShortLivedTracker())
    out = run(agent, clip, run_id="grid-points")
    motion = out["motion"]
    stated = int(re.match(r"Motion tracks: (\d+) points", motion.summary).group(1))
    assert stated > GRID_SIZE**2  # the later query frames' points were kept
    assert motion.points == stated
