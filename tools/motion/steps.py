"""Per-step motion of point tracks: the pure math behind `tools.motion.summary` (speeds per clip frame, the
noise floor's window displacement, default thresholds, spans of moving frames, clip order). The definitions and
the measurements behind the numbers are argued in `tools.motion.summary`'s module docstring ("Noise floor")."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from tools.motion.base import MotionTracks

NOISE_FLOOR_PX = 2.5
"""Net displacement (pixels) a moving step's neighbourhood must exceed: above LK's jitter on still noisy
scenes (`tools.motion.summary` module docstring, "Noise floor")."""
NOISE_HALF_WINDOW = 2
"""Tracked steps on each side of a step that its neighbourhood spans (five steps in all)."""


def segments(mask: npt.ArrayLike, labels: Sequence[int]) -> list[tuple[int, int]]:
    """Spans ``(labels[i], labels[j])`` of consecutive True entries of a 1-D mask."""
    out: list[tuple[int, int]] = []
    start = None
    for i, m in enumerate(np.asarray(mask, bool).tolist() + [False]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            out.append((int(labels[start]), int(labels[i - 1])))
            start = None
    return out


def frame_gaps(frame_indices: Sequence[int]) -> np.ndarray:
    """Clip frames between consecutive tracked frames ``[T-1]`` (at least 1, so a repeated index cannot
    divide by zero; `summarize_tracks` sorts the frames first, and an unordered one cannot flip a speed's
    sign)."""
    return np.maximum(np.abs(np.diff(np.asarray(frame_indices, np.int64))), 1)


def step_motion(tracks: MotionTracks, speed_threshold: float, noise_floor: float = NOISE_FLOOR_PX,
                half_window: int = NOISE_HALF_WINDOW) -> tuple[np.ndarray, np.ndarray]:
    """Per-step displacement vectors ``[T-1,N,2]`` (0 where an end is untracked) and the moving mask ``[T-1,N]``:
    both ends tracked, speed (step length per clip frame between the two tracked frames) above
    ``speed_threshold``, and the step's `window_displacement` above ``noise_floor`` pixels (`tools.motion.summary`,
    "Noise floor")."""
    step = np.diff(tracks.tracks, axis=0)
    both = tracks.visible[1:] & tracks.visible[:-1]
    step = np.where(both[..., None], step, 0.0)
    speed = np.linalg.norm(step, axis=-1) / frame_gaps(tracks.frame_indices)[:, None]
    fast = both & (speed > speed_threshold)
    moving = fast & (window_displacement(step, half_window) > noise_floor)
    return step, moving


def window_displacement(step: np.ndarray, half_window: int) -> np.ndarray:
    """``[S,N]``: for each step ``k`` of ``step`` ``[S,N,2]``, the larger of the distances from the point's
    position before the window (``half_window`` steps before ``k``) to its position after ``k``, and from its
    position before ``k`` to its position after the window. Positions are sums of the tracked steps (vector
    sums: jitter cancels instead of adding up, and an untracked step adds nothing). Both ends are measured
    from the step so that a quick move out and back inside the window still counts."""
    if not isinstance(half_window, int | np.integer) or half_window < 0:
        raise ValueError(f"half_window must be a whole number of steps >= 0, got {half_window!r}")
    s_total = step.shape[0]
    pos = np.concatenate([np.zeros((1,) + step.shape[1:]), np.cumsum(step, axis=0)])  # [S+1,N,2]
    k = np.arange(s_total)
    before, after = np.maximum(k - half_window, 0), np.minimum(k + half_window + 1, s_total)
    return np.maximum(np.linalg.norm(pos[k + 1] - pos[before], axis=-1),
                      np.linalg.norm(pos[after] - pos[k], axis=-1))


def default_thresholds(frame_size: tuple[int, int]) -> tuple[float, float]:
    """(speed px per clip frame, net displacement px) for frames of ``(height, width)``: 0.1% and 2% of
    the diagonal, at least 0.1 px/frame and `NOISE_FLOOR_PX` (the choice is argued in `tools.motion.summary`)."""
    diagonal = float(np.hypot(*frame_size))
    return max(0.1, 0.001 * diagonal), max(NOISE_FLOOR_PX, 0.02 * diagonal)


def in_clip_order(tracks: MotionTracks) -> MotionTracks:
    """``tracks`` with its frames sorted by clip index (stable; ``query_frames`` follow their frames); the
    tracks themselves when they already are in order."""
    order = np.argsort(np.asarray(tracks.frame_indices, np.int64), kind="stable")
    if (order == np.arange(len(order))).all():
        return tracks
    position = np.empty_like(order)
    position[order] = np.arange(len(order))
    return MotionTracks(tracks=tracks.tracks[order], visible=tracks.visible[order],
                        query_frames=position[tracks.query_frames],
                        frame_indices=[tracks.frame_indices[i] for i in order])
