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
- Grey-scale frames are converted once and shared by both directions (OpenCV 5's Python binding
  rejects prebuilt pyramids: a list from ``cv2.buildOpticalFlowPyramid`` fails overload resolution).
- Fewer OpenCV calls, same numbers: LK treats every point independently, so all points whose query
  frame lies behind the current frame pair (in the direction of travel) are tracked together in one
  forward call per frame pair and direction, whatever their query frame; and the backward (check)
  call only takes the points that passed the forward tests, since a point failing those is rejected
  whatever the backward step gives. Results are bit-identical to tracking each query group alone.
- OpenCV's thread count is left alone (``cv2.setNumThreads`` is process-wide and would change
  every other OpenCV user in the process).
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
        start = q[:, 1:3].astype(np.float32)
        tracks[query_frames, np.arange(n)] = start
        visible[query_frames, np.arange(n)] = True
        grays: list[np.ndarray | None] = [None] * t_total

        def gray(i: int) -> np.ndarray:
            g = grays[i]
            if g is None:
                g = grays[i] = cv2.cvtColor(frames[i], cv2.COLOR_RGB2GRAY)
            return g

        for direction in (1, -1):
            self._propagate(gray, direction, query_frames, start, tracks, visible, h, w)
        return MotionTracks(tracks=tracks, visible=visible, query_frames=query_frames,
                            frame_indices=list(range(t_total)))

    def _propagate(self, gray, direction: int, query_frames: np.ndarray, start: np.ndarray,
                   tracks: np.ndarray, visible: np.ndarray, h: int, w: int) -> None:
        """Track every point from its query frame one frame at a time in ``direction`` (+1 or -1)."""
        t_total = visible.shape[0]
        cur = start.copy()
        alive = np.ones(len(start), bool)
        steps = range(int(query_frames.min()), t_total - 1) if direction > 0 \
            else range(int(query_frames.max()), 0, -1)
        for t in steps:
            nxt = t + direction
            started = query_frames <= t if direction > 0 else query_frames >= t
            if not started.any():
                continue
            moving = np.flatnonzero(started & alive)
            if len(moving):
                p1, ok = self._step(gray(t), gray(nxt), cur[moving], h, w)
                cur[moving[ok]] = p1[ok]
                alive[moving[~ok]] = False
            tracks[nxt, started] = cur[started]
            visible[nxt, started] = alive[started]

    def _step(self, img0: np.ndarray, img1: np.ndarray, p0: np.ndarray, h: int,
              w: int) -> tuple[np.ndarray, np.ndarray]:
        """One LK step of points ``p0`` [K,2] from ``img0`` to ``img1``: (new positions [K,2], accepted
        mask [K]); the backward (check) call takes only the points that passed the forward tests."""
        c = self.config
        p1, st, err = cv2.calcOpticalFlowPyrLK(img0, img1, p0.reshape(-1, 1, 2), None, **self._lk_args)
        p1 = p1.reshape(-1, 2)
        ok = ((st.ravel() == 1) & np.isfinite(p1).all(axis=1) & (err.ravel() < c.max_patch_error)
              & in_bounds(p1, h, w))
        fwd = np.flatnonzero(ok)
        if len(fwd):
            p0b, st_b, _ = cv2.calcOpticalFlowPyrLK(img1, img0, p1[fwd].reshape(-1, 1, 2), None,
                                                    **self._lk_args)
            fb = np.linalg.norm(p0b.reshape(-1, 2) - p0[fwd], axis=1)
            ok[fwd] = (st_b.ravel() == 1) & (fb < c.fb_threshold)
        return p1, ok
