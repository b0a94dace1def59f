"""OpenCV pyramidal Lucas-Kanade point tracker with a forward-backward consistency check (CPU, no weights).

Each point is tracked frame to frame from its query frame, forward to the end of the clip and
backward to the start. A step is accepted only when (a) OpenCV reports success both ways, (b) the
forward-backward error ``|p - LK_back(LK_fwd(p))|`` is below ``fb_threshold`` pixels, (c) the
patch error is below ``max_patch_error`` (catches an occluder sliding over the point) and (d) the
new position lies inside the image. Decisions where the issue was silent:
- ``visible`` means "reliably tracked and in the image". LK cannot re-detect a point, so once a
  step is rejected the point stays invisible for the rest of that direction and its position
  holds the last reliable estimate. Points on textureless areas may therefore be reported
  invisible early; summaries call this "tracked", not "seen".
- Grey-scale frames are converted once and shared by all query groups and both directions
  (OpenCV's Python binding cannot take prebuilt pyramids).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from tools.motion.base import MotionTracks, in_bounds, resolve_queries, validate_frames


@dataclass
class LKConfig:
    """Lucas-Kanade settings."""

    win_size: int = 11
    """Side of the square search window (pixels) at each pyramid level."""
    max_level: int = 3
    """Number of pyramid levels above the base image (0 = no pyramid)."""
    fb_threshold: float = 1.0
    """Largest accepted forward-backward error in pixels."""
    max_patch_error: float = 25.0
    """Largest accepted mean absolute patch difference (grey levels) between consecutive frames."""
    max_iterations: int = 20
    """Iteration cap of the LK solver."""
    epsilon: float = 0.03
    """Convergence threshold of the LK solver."""


class LKTracker:
    """MotionTracker backend based on ``cv2.calcOpticalFlowPyrLK``."""

    name = "lk"

    def __init__(self, config: LKConfig | None = None) -> None:
        self.config = config or LKConfig()
        c = self.config
        self._lk_args = dict(winSize=(c.win_size, c.win_size), maxLevel=c.max_level,
                             criteria=(cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT,
                                       c.max_iterations, c.epsilon))

    def track(self, frames: np.ndarray, *, grid_size: int | None = None,
              queries: np.ndarray | None = None) -> MotionTracks:
        frames = validate_frames(frames)
        q = resolve_queries(frames.shape, grid_size, queries)
        t_total, h, w = frames.shape[:3]
        n = len(q)
        tracks = np.zeros((t_total, n, 2), np.float32)
        visible = np.zeros((t_total, n), bool)
        query_frames = q[:, 0].astype(np.int64)
        grays: dict[int, np.ndarray] = {}

        def pyramid(i: int) -> np.ndarray:
            if i not in grays:
                grays[i] = cv2.cvtColor(frames[i], cv2.COLOR_RGB2GRAY)
            return grays[i]

        for t0 in np.unique(query_frames):
            idx = np.flatnonzero(query_frames == t0)
            start = q[idx, 1:3].astype(np.float32)
            tracks[t0, idx] = start
            visible[t0, idx] = True
            for direction in (1, -1):
                self._propagate(pyramid, int(t0), direction, t_total, idx, start, tracks, visible, h, w)
        return MotionTracks(tracks=tracks, visible=visible, query_frames=query_frames,
                            frame_indices=list(range(t_total)))

    def _propagate(self, pyramid, t0: int, direction: int, t_total: int, idx: np.ndarray,
                   start: np.ndarray, tracks: np.ndarray, visible: np.ndarray, h: int, w: int) -> None:
        """Track points ``idx`` from ``t0`` one frame at a time in ``direction`` (+1 or -1)."""
        cur = start.copy()
        alive = np.ones(len(idx), bool)
        t = t0
        while 0 <= t + direction < t_total:
            nxt = t + direction
            if alive.any():
                p0 = cur[alive].reshape(-1, 1, 2)
                p1, st, err = cv2.calcOpticalFlowPyrLK(pyramid(t), pyramid(nxt), p0, None, **self._lk_args)
                p0b, st_b, _ = cv2.calcOpticalFlowPyrLK(pyramid(nxt), pyramid(t), p1, None, **self._lk_args)
                p1, p0b = p1.reshape(-1, 2), p0b.reshape(-1, 2)
                fb = np.linalg.norm(p0b - p0.reshape(-1, 2), axis=1)
                ok = ((st.ravel() == 1) & (st_b.ravel() == 1) & np.isfinite(p1).all(axis=1)
                      & (fb < self.config.fb_threshold) & (err.ravel() < self.config.max_patch_error)
                      & in_bounds(p1, h, w))
                alive_idx = np.flatnonzero(alive)
                cur[alive_idx[ok]] = p1[ok]
                alive[alive_idx[~ok]] = False
            tracks[nxt, idx] = cur
            visible[nxt, idx] = alive
            t = nxt
