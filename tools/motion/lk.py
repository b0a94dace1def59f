"""OpenCV pyramidal Lucas-Kanade point tracker with a forward-backward consistency check (CPU, no weights).

Each point is tracked frame to frame from its query frame, forward to the end of the clip and
backward to the start. A step is accepted only when (a) OpenCV reports success both ways, (b) the
forward-backward error ``|p - LK_back(LK_fwd(p))|`` is below ``fb_threshold`` pixels, (c) the
patch error is below ``max_patch_error`` (catches an occluder sliding over the point) and (d) the
new position lies inside the image (on one of its pixels: `inside_image`, which clamps a point on an
edge pixel onto its centre); an accepted step's position is then corrected against the query
frame (drift, below). Decisions where the issue was silent:
- ``visible`` means "reliably tracked and in the image". LK cannot re-detect a point, so once a
  step is rejected the point stays invisible for the rest of that direction and its position
  holds the last reliable estimate. Points on textureless areas may therefore be reported
  invisible early; summaries call this "tracked", not "seen".
- Grey-scale frames are converted once and shared by both directions (OpenCV 5's Python binding
  rejects prebuilt pyramids: a list from ``cv2.buildOpticalFlowPyramid`` fails overload resolution), and
  kept for the next call: a grid track (`tools.motion.grid`) calls twice on the same frames. They are reused
  only for the very same array when it is read-only, and so is every array it views down to one owning its
  memory, or to the immutable ``bytes`` of a tool-service request (`_frozen`); the agent and the tool service
  (`tools.service_jobs.track_job`) hand their tracker such frames, freshly decoded. A writeable view of them
  taken before they were made read-only would go unseen (numpy keeps no list of views): a caller must not keep
  one.
- Fewer OpenCV calls, same numbers: LK treats every point independently, so all points whose query
  frame lies behind the current frame pair (in the direction of travel) are tracked together in one
  forward call per frame pair and direction, whatever their query frame; and the backward (check)
  call only takes the points that passed the forward tests, since a point failing those is rejected
  whatever the backward step gives. Results are bit-identical to tracking each query group alone.
- Little Python per step: the points are sorted by query frame inside `track` (and put back in the
  caller's order at the end), so the points a step has started are one contiguous run written by slices,
  the alive ones are an index array kept from step to step, and the steps at which a query group is
  matched against its query frame (drift, below) are worked out once per direction, so a step without a
  match costs no group search. Grey frames come from one ``cvtColor`` call per run of frames. On 2 shared
  cores the agent's window-grid track (`tools.motion.grid`, grid 8) of a 33-frame 256x256 clip went from
  ~58 ms to ~51 ms CPU (best of 80 interleaved runs; median paired ratio 0.84), the same numbers bit for bit
  (tests/test_lk_batching.py).
- A forward-direction check (frame t+1 to t) goes over the same frame pair, with the same settings, as the
  backward chain's step from t+1; where the backward chain takes that step (t+1 at most the last query frame),
  the check waits for it and rides in its call (the points concatenated, split after: each point's numbers are
  its own). That saves each such check's pyramid building: 16 of the grid track's 184 calls, no measurable CPU
  on 2 shared cores but fewer instructions (benchmarks/agent_instructions.py). The checks of the backward
  direction (t to t+1) cannot ride in the forward chain, which has run by then (tests/test_lk_repeats.py).
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

import queue
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict

import cv2
import numpy as np

from tools.motion.base import MotionTracks, inside_image, resolve_queries, validate_frames


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


class _LKArgs(TypedDict):
    """The solver settings every ``cv2.calcOpticalFlowPyrLK`` call of `LKTracker` passes (from `LKConfig`)."""

    winSize: tuple[int, int]
    maxLevel: int
    criteria: tuple[int, int, float]


class LKTracker:
    """MotionTracker backend based on ``cv2.calcOpticalFlowPyrLK``."""

    name = "lk"

    def __init__(self, config: LKConfig | None = None) -> None:
        self.config = config or LKConfig()
        c = self.config
        if not isinstance(c.anchor_every, int) or c.anchor_every < 1:
            raise ValueError(f"anchor_every must be a positive integer (steps), got {c.anchor_every!r}")
        self._lk_args = _LKArgs(winSize=(c.win_size, c.win_size), maxLevel=c.max_level,
                                criteria=(cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT,
                                          c.max_iterations, c.epsilon))
        # the last call's frames (weakly) and their grey frames: `_grays_of`
        self._last_grays: tuple[weakref.ref[np.ndarray], list[np.ndarray]] | None = None

    def track(self, frames: np.ndarray, *, grid_size: int | None = None,
              queries: np.ndarray | None = None) -> MotionTracks:
        frames = validate_frames(frames)
        q = resolve_queries(frames.shape, grid_size, queries)
        t_total, h, w = frames.shape[:3]
        n = len(q)
        query_frames = q[:, 0].astype(np.int64)
        # points sorted by query frame: the points started at a step are then a contiguous run (module docstring)
        order = np.argsort(query_frames, kind="stable")
        qf, start = query_frames[order], q[order, 1:3].astype(np.float32)
        tracks = np.zeros((t_total, n, 2), np.float32)
        visible = np.zeros((t_total, n), bool)
        tracks[qf, np.arange(n)] = start
        visible[qf, np.arange(n)] = True
        grays = self._grays_of(frames)
        checks = _Checks(self._check)
        merged: list[tuple[tuple[int, int, int, np.ndarray], np.ndarray]] = []  # checks made in a chain call
        deferred: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        try:
            for direction in (1, -1):
                self._propagate(grays, direction, qf, start, tracks, visible, h, w, checks, deferred, merged)
        finally:
            failed = checks.finish()
        _reject(failed + merged, tracks, visible)
        if (order[1:] < order[:-1]).any():
            back = np.empty_like(order)
            back[order] = np.arange(n)
            tracks, visible = tracks[:, back], visible[:, back]
        return MotionTracks(tracks=tracks, visible=visible, query_frames=query_frames,
                            frame_indices=list(range(t_total)))

    def _grays_of(self, frames: np.ndarray) -> list[np.ndarray]:
        """`_grays` of ``frames``, the last call's when it got the same frames and they cannot have changed
        since (`_frozen`): a grid track's second call on the same frames converts nothing (module docstring)."""
        last = self._last_grays  # one read: calls from several threads each see a whole pair
        if last is not None and last[0]() is frames and _frozen(frames):
            return last[1]
        grays = _grays(frames)
        self._last_grays = (weakref.ref(frames, self._forget), grays) if _frozen(frames) else None
        return grays

    def _forget(self, ref: weakref.ref[np.ndarray]) -> None:
        """Drop the kept grey frames once their frames are gone (a long-lived tracker holds no clip's greys)."""
        last = self._last_grays
        if last is not None and last[0] is ref:
            self._last_grays = None

    def _propagate(self, grays: list[np.ndarray], direction: int, qf: np.ndarray, start: np.ndarray,
                   tracks: np.ndarray, visible: np.ndarray, h: int, w: int, checks: _Checks,
                   deferred: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]],
                   merged: list[tuple[tuple[int, int, int, np.ndarray], np.ndarray]]) -> None:
        """Track every point from its query frame one frame at a time in ``direction`` (+1 or -1); points are
        sorted by query frame ``qf``, so the points started by a step are a contiguous run.

        The forward chain runs here; each step's backward (check) call goes to the `_Checks` helper
        thread, keyed ``(direction, t, t + direction, points)``, except a forward-direction check over a frame
        pair the backward chain steps over too: that one waits in ``deferred`` (by ``t``) and rides in the
        backward chain's call (one call, same numbers: module docstring), its result going to ``merged``.
        `_reject` applies the failed checks afterwards (see module docstring)."""
        t_total, n = visible.shape
        cur = start.copy()
        alive = np.ones(n, bool)  # passed every forward test so far (checks are applied after)
        steps = range(int(qf[0]), t_total - 1) if direction > 0 else range(int(qf[-1]), 0, -1)
        anchors = _anchor_steps(qf, direction, self.config.anchor_every, steps)
        bounds = np.searchsorted(qf, steps, "right" if direction > 0 else "left").tolist()
        moving = np.zeros(0, np.int64)  # started points still alive, ascending
        lo, hi = (0, 0) if direction > 0 else (n, n)  # the started points: lo..hi-1
        last_back = int(qf[-1])  # the backward chain steps over the pairs (t, t + 1) with t + 1 <= last_back
        for t, bound in zip(steps, bounds, strict=True):
            nxt = t + direction
            if direction > 0 and bound > hi:
                moving, hi = np.concatenate([moving, np.arange(hi, bound)]), bound
            elif direction < 0 and bound < lo:
                moving, lo = np.concatenate([np.arange(bound, lo), moving]), bound
            due = deferred.pop(nxt, None) if direction < 0 else None  # the check of forward step nxt -> t
            if len(moving) or due is not None:
                g0, g1 = grays[t], grays[nxt]
                p0 = cur[moving]
                p1, ok, back = self._forward(g0, g1, p0, h, w, None if due is None else due[1])
                if due is not None:
                    merged.append(((1, nxt, t, due[0]), self._failed(*back, due[2])))
                if not ok.all():
                    alive[moving[~ok]] = False
                    moving, p0, p1 = moving[ok], p0[ok], p1[ok]
                if len(moving):
                    if direction > 0 and nxt <= last_back:
                        deferred[t] = (moving, p1, p0)
                    else:
                        checks.submit((direction, t, nxt, moving), (g1, g0, p1, p0))
                    if t in anchors:
                        p1 = self._anchored(grays, anchors[t], nxt, moving, start, p1, h, w)
                    cur[moving] = p1
            tracks[nxt, lo:hi] = cur[lo:hi]
            visible[nxt, lo:hi] = alive[lo:hi]
        if direction < 0:  # none is left in practice: each deferred pair is a backward step
            for t, (points, p1, p0) in deferred.items():
                checks.submit((1, t, t + 1, points), (grays[t + 1], grays[t], p1, p0))
            deferred.clear()

    def _forward(self, img0: np.ndarray, img1: np.ndarray, p0: np.ndarray, h: int, w: int,
                 extra: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """One forward LK step of points ``p0`` [K,2]: (new positions [K,2], mask [K] of the points that
        pass the forward tests: status, patch error, inside the image; `inside_image` is False for NaN and
        infinities, so it is the finiteness test too, and clamps a point on an edge pixel onto its centre;
        the raw positions and status of the ``extra`` points [M,2], tracked in the same call: a check over
        this image pair, module docstring)."""
        k = len(p0)
        pts = p0 if extra is None else np.concatenate([p0, extra])
        out, st, err = cv2.calcOpticalFlowPyrLK(img0, img1, pts.reshape(-1, 1, 2), None, **self._lk_args)
        out, st = out.reshape(-1, 2), st.ravel()
        p1, inside = inside_image(out[:k], h, w)
        ok = (st[:k] == 1) & (err.ravel()[:k] < self.config.max_patch_error) & inside
        return p1, ok, (out[k:], st[k:])

    def _anchored(self, grays: list[np.ndarray], groups: list[tuple[int, int, int]], nxt: int,
                  points: np.ndarray, start: np.ndarray, p1: np.ndarray, h: int, w: int) -> np.ndarray:
        """Positions ``p1`` [K,2] at frame ``nxt`` of the (ascending) ``points``, those of each query-frame group
        ``(k, lo, hi)`` (points ``lo..hi-1`` were queried at ``start`` on frame ``k``) replaced by their match
        from the query frame (LK started at ``p1``) where that match is good: status, patch error, inside the
        image (finite), within ``anchor_tolerance`` of ``p1`` (module docstring). `_anchor_steps` names the
        groups due at a step."""
        out = p1
        for k, lo, hi in groups:
            a, b = np.searchsorted(points, (lo, hi))
            if a == b:
                continue
            guess = p1[a:b].reshape(-1, 1, 2).copy()
            pa, st, err = cv2.calcOpticalFlowPyrLK(grays[k], grays[nxt], start[points[a:b]].reshape(-1, 1, 2), guess,
                                                   flags=cv2.OPTFLOW_USE_INITIAL_FLOW, **self._lk_args)
            pa, inside = inside_image(pa.reshape(-1, 2), h, w)
            good = ((st.ravel() == 1) & (err.ravel() < self.config.max_patch_error) & inside
                    & (np.linalg.norm(pa - p1[a:b], axis=1) < self.config.anchor_tolerance))
            if out is p1:
                out = p1.copy()
            out[a:b][good] = pa[good]
        return out

    def _check(self, img1: np.ndarray, img0: np.ndarray, p1: np.ndarray, p0: np.ndarray) -> np.ndarray:
        """Backward (check) call of one step: mask of the points whose forward-backward error or
        backward status rejects them."""
        p0b, st_b, _ = cv2.calcOpticalFlowPyrLK(img1, img0, p1.reshape(-1, 1, 2), None, **self._lk_args)
        return self._failed(p0b.reshape(-1, 2), st_b.ravel(), p0)

    def _failed(self, p0b: np.ndarray, st_b: np.ndarray, p0: np.ndarray) -> np.ndarray:
        """Mask of the points whose check failed: backward positions ``p0b`` [K,2] and status ``st_b`` [K]
        against their start ``p0`` [K,2]."""
        return ~((st_b == 1) & (np.linalg.norm(p0b - p0, axis=1) < self.config.fb_threshold))


def _reject(failed: list[tuple[tuple[int, int, int, np.ndarray], np.ndarray]], tracks: np.ndarray,
            visible: np.ndarray) -> None:
    """Apply the failed checks (`_Checks.finish`): a point whose check of step ``t -> nxt`` failed holds its
    position at ``t`` from ``nxt`` to the end of that direction, invisible; its first failure counts."""
    rejected = {1: np.zeros(visible.shape[1], bool), -1: np.zeros(visible.shape[1], bool)}
    for (direction, t, nxt, points), bad in sorted(failed, key=lambda item: (item[0][0], item[0][1] * item[0][0])):
        new = points[bad & ~rejected[direction][points]]
        if len(new):
            span = slice(nxt, None) if direction > 0 else slice(nxt, None, -1)
            tracks[span, new] = tracks[t, new]
            visible[span, new] = False
            rejected[direction][new] = True


def _grays(frames: np.ndarray) -> list[np.ndarray]:
    """Grey versions of contiguous RGB ``frames`` [T,H,W,3]: a few OpenCV calls, each over a run of frames
    stacked into one tall image (a per-pixel conversion: the same values as frame by frame, less per-call
    cost). A run stays under `_GRAY_RUN_PIXELS` (OpenCV counts a continuous image's pixels in an int)."""
    t_total, h, w = frames.shape[:3]
    run = max(1, _GRAY_RUN_PIXELS // (h * w))
    out: list[np.ndarray] = []
    for i in range(0, t_total, run):
        part = frames[i:i + run]
        out.extend(cv2.cvtColor(part.reshape(-1, w, 3), cv2.COLOR_RGB2GRAY).reshape(len(part), h, w))
    return out


def _frozen(frames: np.ndarray) -> bool:
    """Whether ``frames`` is read-only and so is every array it views, down to one that owns its memory or to
    a ``bytes`` object, which cannot change (a read-only view of a writeable array, or of another foreign
    buffer, can). It does not see a writeable view taken before the owner was made read-only: writes through it
    change the frames, so a caller that freezes frames for reuse must hold no such view; neither freezing caller
    can (the agent's `_compute_tracks` and the service's `track_job` freeze freshly decoded or copied arrays,
    or a view of the request's bytes)."""
    a: object = frames
    while isinstance(a, np.ndarray):
        if a.flags.writeable:
            return False
        if a.base is None:
            return True
        a = a.base
    return type(a) is bytes  # immutable: the tool service's zero-copy view of a .npy request body


_GRAY_RUN_PIXELS = 1 << 26
"""Most pixels `_grays` converts in one call (a 256x256 clip: 1024 frames; 1080p: 32)."""


def _anchor_steps(qf: np.ndarray, direction: int, every: int, steps: range) -> dict[int, list[tuple[int, int, int]]]:
    """Steps ``t`` (to ``t + direction``) at which some query-frame group is matched against its query frame:
    ``t -> [(k, lo, hi)]``, the groups' query frame ``k`` and index range in the sorted query frames ``qf``. A
    group is due every ``every`` steps from ``k`` in ``direction``, its first step excepted (module docstring)."""
    ks, los = np.unique(qf, return_index=True)
    his = np.append(los[1:], len(qf))
    out: dict[int, list[tuple[int, int, int]]] = {}
    for k, lo, hi in zip(ks.tolist(), los.tolist(), his.tolist(), strict=True):
        for nxt in range(k + direction * every, steps.stop + direction, direction * every):
            t = nxt - direction
            if t != k and t in steps:
                out.setdefault(t, []).append((k, lo, hi))
    return out


class _Checks:
    """Runs check jobs on a helper thread while the caller keeps submitting; `finish` runs the jobs
    the helper has not taken in the calling thread, so the caller never waits for a queued job. The jobs
    travel through a `queue.SimpleQueue` (one C-level put and get per job, no Python lock dance per step)."""

    def __init__(self, run: Callable[..., np.ndarray]) -> None:
        self._run = run
        self._jobs: queue.SimpleQueue[tuple[Any, tuple] | None] = queue.SimpleQueue()
        self._done: list[tuple[Any, np.ndarray]] = []
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def submit(self, key: Any, args: tuple) -> None:
        self._jobs.put((key, args))
        if self._thread is None:  # started on the first job: clips without steps cost no thread
            self._thread = threading.Thread(target=self._helper, name="lk-checks", daemon=True)
            self._thread.start()

    def _helper(self) -> None:
        try:
            while (job := self._jobs.get()) is not None:  # None: `finish` is done with the queue
                self._done.append((job[0], self._run(*job[1])))
        except BaseException as exc:  # noqa: BLE001 - re-raised by finish() in the caller
            self._error = exc

    def _take(self) -> tuple[Any, tuple] | None:
        try:
            return self._jobs.get_nowait()
        except queue.Empty:
            return None

    def finish(self) -> list[tuple[Any, np.ndarray]]:
        """All (key, result) pairs, in no particular order; re-raises a job's exception."""
        try:
            while (job := self._take()) is not None:
                self._done.append((job[0], self._run(*job[1])))
        finally:
            if self._thread is not None:
                self._jobs.put(None)
                self._thread.join()
        if self._error is not None:
            raise self._error
        return self._done
