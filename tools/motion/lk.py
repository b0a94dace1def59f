"""OpenCV pyramidal Lucas-Kanade point tracker with a forward-backward consistency check (CPU, no weights).

Each point is tracked frame to frame from its query frame, forward to the end of the clip and
backward to the start. A step is accepted only when (a) OpenCV reports success both ways, (b) the
forward-backward error ``|p - LK_back(LK_fwd(p))|`` is below ``fb_threshold`` pixels, (c) the
patch error is below ``max_patch_error`` (catches an occluder sliding over the point) and (d) the
new position lies inside the image; an accepted step's position is then corrected against the query
frame (drift, below). Decisions where the issue was silent:
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
- The checks run beside the forward chain: the forward call of step t+1 needs only the forward
  result of step t, so each step's backward (check) call goes to a helper thread while the chain
  goes on (OpenCV releases the GIL), and a point whose check fails is rejected afterwards from that
  step on (position held, invisible), exactly as if it had stopped there. The chain may carry a
  doomed point a few steps further; since points are independent, that changes no other point.
  On 2 cores this takes a 32-frame, 64-point track from ~13 ms / 26 ms CPU to ~11 ms / 20 ms CPU
  (OpenCV's own per-call threading spends more CPU than it saves for so few points), and the
  results equal the plain step-by-step algorithm bit for bit (tests/test_motion.py).
- Drift: chained frame-to-frame steps add up their small errors (a random walk), which no per-step
  test sees: over 120 noisy frames (sensor noise sigma 6) a point on a static scene wandered 4.5 px while
  reported tracked, a net displacement the summary reads as motion (and the walk later failed checks,
  losing 9% of point-frames). So each accepted step is also matched against the point's own query frame
  (LK from the query point, started at the chained estimate, ``OPTFLOW_USE_INITIAL_FLOW``), and that match
  replaces the chained position when it passes status, patch error and image bounds and lies within
  ``anchor_tolerance`` (3 px) of it; the error then stays at the level of one match however long the
  window (tests/test_motion.py). A match farther off, or failing, is taken for a changed appearance (the
  object turned, deformed, is lit differently), not drift, and the chained position stands: rejecting
  the point there would lose every deforming object. The forward-backward check stays on the chained
  step. The match is made every ``anchor_every`` (4) steps from the query frame, not at every step: each
  is one more OpenCV call per query frame, whose cost is mostly per image, not per point (at every step
  it made a 32-frame, 64-point track ~75% dearer and the agent's 16-clip benchmark noticeably slower);
  between matches at most three chained steps add up, so the error stays at the level of a few steps'
  noise however long the window. A point's first step from its query frame needs none (it is that match).
- OpenCV's thread count is left alone (``cv2.setNumThreads`` is process-wide and would change
  every other OpenCV user in the process).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
    anchor_every: int = 4
    """Steps between matches against the query frame (1: every step); module docstring."""
    anchor_tolerance: float = 3.0
    """Largest correction (pixels) the match against the query frame may make to a chained step; a match
    farther off is taken for a changed appearance, not drift, and the chained position is kept."""


class LKTracker:
    """MotionTracker backend based on ``cv2.calcOpticalFlowPyrLK``."""

    name = "lk"

    def __init__(self, config: LKConfig | None = None) -> None:
        self.config = config or LKConfig()
        c = self.config
        if not isinstance(c.anchor_every, int) or c.anchor_every < 1:
            raise ValueError(f"anchor_every must be a positive integer (steps), got {c.anchor_every!r}")
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
        """Track every point from its query frame one frame at a time in ``direction`` (+1 or -1).

        The forward chain runs here; each step's backward (check) call goes to a `_Checks` helper
        thread, and a point failing its check is rejected afterwards from that step on (see module
        docstring)."""
        t_total = visible.shape[0]
        cur = start.copy()
        alive = np.ones(len(start), bool)  # passed every forward test so far (checks are applied after)
        steps = range(int(query_frames.min()), t_total - 1) if direction > 0 \
            else range(int(query_frames.max()), 0, -1)
        checks = _Checks(self._check)
        try:
            for t in steps:
                nxt = t + direction
                started = query_frames <= t if direction > 0 else query_frames >= t
                if not started.any():
                    continue
                moving = np.flatnonzero(started & alive)
                if len(moving):
                    p0 = cur[moving]
                    p1, ok = self._forward(gray(t), gray(nxt), p0, h, w)
                    if ok.any():
                        checks.submit((t, nxt, moving[ok]), (gray(nxt), gray(t), p1[ok], p0[ok]))
                        p1[ok] = self._anchored(gray, t, nxt, query_frames[moving[ok]], start[moving[ok]], p1[ok],
                                                h, w)
                    cur[moving[ok]] = p1[ok]
                    alive[moving[~ok]] = False
                tracks[nxt, started] = cur[started]
                visible[nxt, started] = alive[started]
        finally:
            failed = checks.finish()
        rejected = np.zeros(len(start), bool)
        for (t, nxt, points), bad in sorted(failed, key=lambda item: item[0][0] * direction):
            new = points[bad & ~rejected[points]]
            if len(new):  # hold the last reliable position from `nxt` to the end, invisible
                span = slice(nxt, None) if direction > 0 else slice(nxt, None, -1)
                tracks[span, new] = tracks[t, new]
                visible[span, new] = False
                rejected[new] = True

    def _forward(self, img0: np.ndarray, img1: np.ndarray, p0: np.ndarray, h: int,
                 w: int) -> tuple[np.ndarray, np.ndarray]:
        """One forward LK step of points ``p0`` [K,2]: (new positions [K,2], mask [K] of the points that
        pass the forward tests: status, finite, patch error, inside the image)."""
        p1, st, err = cv2.calcOpticalFlowPyrLK(img0, img1, p0.reshape(-1, 1, 2), None, **self._lk_args)
        p1 = p1.reshape(-1, 2)
        ok = ((st.ravel() == 1) & np.isfinite(p1).all(axis=1) & (err.ravel() < self.config.max_patch_error)
              & in_bounds(p1, h, w))
        return p1, ok

    def _anchored(self, gray: Callable[[int], np.ndarray], t: int, nxt: int, query_frames: np.ndarray,
                  anchors: np.ndarray, p1: np.ndarray, h: int, w: int) -> np.ndarray:
        """Positions ``p1`` [K,2] at frame ``nxt`` of points queried at ``anchors`` on ``query_frames``, each
        replaced by its match from its query frame (LK started at ``p1``) where that match is good: status,
        finite, patch error, inside the image, within ``anchor_tolerance`` of ``p1`` (module docstring). Points
        whose query frame is ``t`` are kept as they are: their chained step already was that match."""
        out = p1.copy()
        for k in np.unique(query_frames):
            if k == t or abs(nxt - int(k)) % self.config.anchor_every:
                continue
            sel = np.flatnonzero(query_frames == k)
            guess = p1[sel].reshape(-1, 1, 2).copy()
            pa, st, err = cv2.calcOpticalFlowPyrLK(gray(int(k)), gray(nxt), anchors[sel].reshape(-1, 1, 2), guess,
                                                   flags=cv2.OPTFLOW_USE_INITIAL_FLOW, **self._lk_args)
            pa = pa.reshape(-1, 2)
            good = ((st.ravel() == 1) & np.isfinite(pa).all(axis=1) & (err.ravel() < self.config.max_patch_error)
                    & in_bounds(pa, h, w) & (np.linalg.norm(pa - p1[sel], axis=1) < self.config.anchor_tolerance))
            out[sel[good]] = pa[good]
        return out

    def _check(self, img1: np.ndarray, img0: np.ndarray, p1: np.ndarray, p0: np.ndarray) -> np.ndarray:
        """Backward (check) call of one step: mask of the points whose forward-backward error or
        backward status rejects them."""
        p0b, st_b, _ = cv2.calcOpticalFlowPyrLK(img1, img0, p1.reshape(-1, 1, 2), None, **self._lk_args)
        fb = np.linalg.norm(p0b.reshape(-1, 2) - p0, axis=1)
        return ~((st_b.ravel() == 1) & (fb < self.config.fb_threshold))


class _Checks:
    """Runs check jobs on a helper thread while the caller keeps submitting; `finish` runs the jobs
    the helper has not taken in the calling thread, so the caller never waits for a queued job."""

    def __init__(self, run: Callable[..., np.ndarray]) -> None:
        self._run = run
        self._jobs: deque[tuple[Any, tuple]] = deque()
        self._done: list[tuple[Any, np.ndarray]] = []
        self._cond = threading.Condition()
        self._closed = False
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def submit(self, key: Any, args: tuple) -> None:
        with self._cond:
            self._jobs.append((key, args))
            self._cond.notify()
        if self._thread is None:  # started on the first job: clips without steps cost no thread
            self._thread = threading.Thread(target=self._helper, name="lk-checks", daemon=True)
            self._thread.start()

    def _next(self, wait: bool) -> tuple[Any, tuple] | None:
        with self._cond:
            while wait and not self._jobs and not self._closed:
                self._cond.wait()
            return self._jobs.popleft() if self._jobs else None

    def _helper(self) -> None:
        try:
            while (job := self._next(wait=True)) is not None:
                self._done.append((job[0], self._run(*job[1])))
        except BaseException as exc:  # noqa: BLE001 - re-raised by finish() in the caller
            self._error = exc

    def finish(self) -> list[tuple[Any, np.ndarray]]:
        """All (key, result) pairs, in no particular order; re-raises a job's exception."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        while (job := self._next(wait=False)) is not None:
            self._done.append((job[0], self._run(*job[1])))
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error
        return self._done
