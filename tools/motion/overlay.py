"""Track overlays drawn with OpenCV, for the reflect stage and HTML reports.

Decisions where the issue was silent: each track gets a fixed colour from an HSV wheel; the last
``tail`` tracked positions are joined by a line; a tracked point is a filled dot, a point that is
not tracked in that frame is drawn as a small grey ring at its last estimate (``show_lost=True``)
or omitted. Frames are copied, never modified in place.
"""

from __future__ import annotations

import cv2
import numpy as np

from tools.motion.base import MotionTracks


def track_colors(n: int) -> np.ndarray:
    """``n`` distinct RGB colours (uint8 ``[n,3]``) spread over the hue wheel."""
    hsv = np.stack([(np.arange(n) * 180 // max(n, 1)) % 180, np.full(n, 220), np.full(n, 255)], axis=1)
    return cv2.cvtColor(hsv.astype(np.uint8)[None], cv2.COLOR_HSV2RGB)[0]


def draw_tracks(frames: np.ndarray, tracks: MotionTracks, *, tail: int = 8, radius: int = 2,
                show_lost: bool = True) -> np.ndarray:
    """Return a copy of ``frames`` ``[T,H,W,3]`` uint8 with the tracks drawn on every frame."""
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise ValueError(f"frames must be uint8 [T,H,W,3], got {frames.dtype} {frames.shape}")
    if frames.shape[0] != tracks.num_frames:
        raise ValueError(f"{frames.shape[0]} frames but tracks cover {tracks.num_frames}")
    out = frames.copy()
    colors = [tuple(int(v) for v in c) for c in track_colors(tracks.num_points)]
    pts = np.round(tracks.tracks).astype(np.int32)
    for t in range(out.shape[0]):
        img = np.ascontiguousarray(out[t])
        for n in range(tracks.num_points):
            lo = max(0, t - tail)
            seg = [pts[s, n] for s in range(lo, t + 1) if tracks.visible[s, n]]
            if len(seg) > 1:
                cv2.polylines(img, [np.asarray(seg).reshape(-1, 1, 2)], False, colors[n], 1, cv2.LINE_AA)
            p = (int(pts[t, n, 0]), int(pts[t, n, 1]))
            if tracks.visible[t, n]:
                cv2.circle(img, p, radius, colors[n], -1, cv2.LINE_AA)
            elif show_lost:
                cv2.circle(img, p, radius, (128, 128, 128), 1, cv2.LINE_AA)
        out[t] = img
    return out
