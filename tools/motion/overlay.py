"""Track overlays drawn with OpenCV, for the reflect stage and HTML reports.

Decisions where the issue was silent: each track gets a fixed colour from an HSV wheel; the last
``tail`` tracked positions are joined by a line; a tracked point is a filled dot, a point that is
not tracked in that frame is drawn as a small grey ring at its last estimate (``show_lost=True``)
or omitted. Frames are copied, never modified in place. ``at`` draws only the chosen frames (the
agent shows 4 overlays of a 32-frame track, so drawing the other 28 would be wasted work); each
drawn frame is pixel-identical to the same frame of a full draw. Draw on the frames at the size they
are shown at, not before shrinking them: dots of radius 2 and 1-pixel lines drawn on a 1080p frame
vanish when it is sent at 512 pixels (the agent's track overlays were blank for high-resolution
clips). ``scale`` maps the tracks' coordinates onto frames resized after tracking.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from tools.motion.base import MotionTracks


def track_colors(n: int) -> np.ndarray:
    """``n`` distinct RGB colours (uint8 ``[n,3]``) spread over the hue wheel (none for 0: OpenCV refuses an
    empty image, so drawing zero tracks raised cv2.error)."""
    if n <= 0:
        return np.zeros((0, 3), np.uint8)
    hsv = np.stack([(np.arange(n) * 180 // max(n, 1)) % 180, np.full(n, 220), np.full(n, 255)], axis=1)
    return cv2.cvtColor(hsv.astype(np.uint8)[None], cv2.COLOR_HSV2RGB)[0]


def draw_tracks(frames: np.ndarray | Sequence[np.ndarray | None], tracks: MotionTracks, *, tail: int = 8,
                radius: int = 2, show_lost: bool = True, at: Sequence[int] | None = None,
                scale: tuple[float, float] = (1.0, 1.0)) -> np.ndarray:
    """A copy of ``frames`` ``[T,H,W,3]`` uint8 with the tracks drawn on every frame, or only on the
    frames at positions ``at`` (then the result is ``[len(at),H,W,3]``, in the order of ``at``).
    ``frames`` may also be a sequence of T ``[H,W,3]`` frames: only the drawn ones are read (no
    stacked copy of the clip; the others may be None). ``scale`` ``(sx, sy)``: the frames are the tracked frames resized by
    these factors (a track pixel ``x`` is drawn at ``(x + 0.5) * sx - 0.5``)."""
    sx, sy = (float(v) for v in scale)
    if not (sx > 0 and sy > 0):
        raise ValueError(f"scale must be two positive factors, got {scale!r}")
    if isinstance(frames, np.ndarray) and (frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8):
        raise ValueError(f"frames must be uint8 [T,H,W,3], got {frames.dtype} {frames.shape}")
    if len(frames) != tracks.num_frames:
        raise ValueError(f"{len(frames)} frames but tracks cover {tracks.num_frames}")
    positions = list(range(len(frames))) if at is None else [int(t) for t in at]
    if any(not 0 <= t < len(frames) for t in positions):
        raise ValueError(f"frame positions {positions} out of range 0..{len(frames) - 1}")
    if positions:
        out = np.stack([np.asarray(frames[t]) for t in positions])
    else:  # nothing to draw: an empty [0,H,W,3] result, shaped from one frame (the clip is not stacked)
        first = np.asarray(frames[0]) if len(frames) else np.zeros((0, 0, 3), np.uint8)
        out = np.empty((0, *first.shape), first.dtype)
    if out.ndim != 4 or out.shape[-1] != 3 or out.dtype != np.uint8:
        raise ValueError(f"frames must be uint8 [H,W,3] each, got {out.dtype} {out.shape[1:]}")
    colors = [tuple(int(v) for v in c) for c in track_colors(tracks.num_points)]
    xy = tracks.tracks if (sx, sy) == (1.0, 1.0) else tracks.rescaled(sx, sy).tracks
    pts = np.round(xy).astype(np.int32)
    visible = np.asarray(tracks.visible, bool)
    for k, t in enumerate(positions):
        img = np.ascontiguousarray(out[k])
        lo = max(0, t - tail)
        window, seen = pts[lo:t + 1], visible[lo:t + 1]
        for n in range(tracks.num_points):
            seg = window[seen[:, n], n]
            if len(seg) > 1:
                cv2.polylines(img, [seg.reshape(-1, 1, 2)], False, colors[n], 1, cv2.LINE_AA)
            p = (int(pts[t, n, 0]), int(pts[t, n, 1]))
            if visible[t, n]:
                cv2.circle(img, p, radius, colors[n], -1, cv2.LINE_AA)
            elif show_lost:
                cv2.circle(img, p, radius, (128, 128, 128), 1, cv2.LINE_AA)
        out[k] = img
    return out


def draw_tracks_resized(shown: Sequence[np.ndarray], tracks: MotionTracks, at: Sequence[int],
                        tracked_size: tuple[int, int]) -> np.ndarray:
    """``draw_tracks`` on frames resized after tracking: ``shown[k]`` is the tracked frame at position
    ``at[k]``, resized from ``tracked_size`` (height, width) to its own size (all ``shown`` one size)."""
    if len(shown) != len(at) or not len(shown):
        raise ValueError(f"{len(shown)} shown frames for {len(at)} positions")
    frames: list[np.ndarray | None] = [None] * tracks.num_frames  # draw_tracks reads only the drawn ones
    for k, frame in zip(at, shown, strict=True):
        frames[int(k)] = frame
    (h, w), (sh, sw) = tracked_size, np.asarray(shown[0]).shape[:2]
    return draw_tracks(frames, tracks, at=at, scale=(sw / w, sh / h))
