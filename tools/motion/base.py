"""Motion-track data type, tracker protocol and shared input validation.

Conventions (decisions where the issue was silent):
- ``frames`` are RGB uint8 ``[T,H,W,3]``; at least one frame. A one-frame clip yields tracks that
  sit at their query points, visible in that frame.
- ``queries`` are ``[N,3]`` rows ``(t, x, y)``: ``t`` indexes the ``frames`` array passed in
  (not the original clip), ``x, y`` are pixels with ``(0, 0)`` the centre of the top-left pixel.
  ``t`` must be a whole number in ``[0, T)``; a query outside the image ``[0, W-1] x [0, H-1]`` is a
  caller error. Both raise :class:`TrackQueryError` (a ``ValueError``) naming the offending rows,
  so a bad plan from the agent is reported, not silently dropped.
- ``grid_size=g`` places ``g*g`` points at cell centres of a regular grid on frame 0. Every backend
  uses the same grid points (passed to the model as explicit queries), so backends are comparable.
  ``g`` is at most the frame's short side: a finer grid puts its outer cell centres outside the image
  (x < 0), which as explicit queries would be refused, so it is a TrackQueryError too (it tracked them
  as visible points). A grid on frame 0 alone never tracks what enters the view later; the agent's grid
  tracks (and the HTML report's) query the grid on several frames instead (`tools.motion.grid`), while
  ``grid_size`` keeps this meaning for every tracker and the tool service (whose ``grid_frames: "window"``
  asks for the agent's grid instead).
- A tracked point is in the image while it lies on one of its pixels, less than half a pixel past the
  edge pixels' centres; there it is clamped onto the query range (`inside_image`).
- When a tracked point is lost or leaves the image its position keeps the last reliable estimate
  and ``visible`` is False from then on (backends document their own re-acquisition rules). A
  position a model gives as NaN or infinity is replaced by the last finite one in tracking order
  (outward from the query frame; the query point at the query frame), never left in ``tracks``
  (`fill_lost_positions`): JSON has no NaN, and every consumer would have to mask it.
- A tracker the caller injects is checked at the boundary (`require_tracks`, `tracks_problem`: the type,
  frame and point counts, query frames, finite positions within `POSITION_BOUND_FRAMES` frame sizes of the
  image); the agent turns a violation into a motion tool fault (the tool service answers it as a 500 motion
  run fault). The bound: a point that left the image keeps a position near where it left (its last
  estimate), and a model extrapolating one stays within a frame or two; 10 frame sizes past the edge is no
  tracking. Finite positions of 1e30 px passed, and their distances overflowed float32 to "inf" in the
  summary the model read.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

import numpy as np

TRACK_SHORT_SIDE = 576
"""Short side (pixels) of the frames the reward agent tracks on (``ToolSettings.track_short_side``):
CoTracker3 works at 384x512 whatever it is given, and LK needs no more for the agent's summaries and
512-pixel overlays; 32 frames of a 4K clip are 0.8 GB at full size (and over the tool service's upload
limit), 57 MB at 576."""


POSITION_BOUND_FRAMES = 10
"""How far past the image a tracked position may lie, in frame sizes: ``x`` within ``[-10 W, W - 1 + 10 W]``, ``y``
likewise with ``H`` (`tracks_problem`; module docstring). Distances between such positions stay finite."""


class TrackQueryError(ValueError):
    """Query points or grid settings that cannot be tracked (names the bad rows)."""


@dataclass
class MotionTracks:
    """Point trajectories over a clip."""

    tracks: np.ndarray
    """float32 ``[T,N,2]`` pixel coordinates ``(x, y)`` of every point in every frame."""
    visible: np.ndarray
    """bool ``[T,N]``: the point is tracked reliably and inside the image in that frame."""
    query_frames: np.ndarray
    """int ``[N]``: frame (index into the tracked frames) where each point was specified."""
    frame_indices: list[int] = field(default_factory=list)
    """Original clip index of each of the T tracked frames (``range(T)`` when unknown)."""

    def __post_init__(self) -> None:
        self.tracks = np.asarray(self.tracks, dtype=np.float32)
        self.visible = np.asarray(self.visible, dtype=bool)
        self.query_frames = np.asarray(self.query_frames, dtype=np.int64)
        if self.tracks.ndim != 3 or self.tracks.shape[-1] != 2:
            raise ValueError(f"tracks must be [T,N,2], got {self.tracks.shape}")
        t, n, _ = self.tracks.shape
        if self.visible.shape != (t, n):
            raise ValueError(f"visible must be [{t},{n}], got {self.visible.shape}")
        if self.query_frames.shape != (n,):
            raise ValueError(f"query_frames must be [{n}], got {self.query_frames.shape}")
        if not self.frame_indices:
            self.frame_indices = list(range(t))
        self.frame_indices = [int(i) for i in self.frame_indices]
        if len(self.frame_indices) != t:
            raise ValueError(f"frame_indices has {len(self.frame_indices)} entries for {t} frames")

    def rescaled(self, sx: float, sy: float) -> MotionTracks:
        """The same tracks on frames resized by ``(sx, sy)``: pixel ``x`` maps to ``(x + 0.5) * sx - 0.5``
        (pixel centres stay centres)."""
        if not (sx > 0 and sy > 0):
            raise ValueError(f"scale factors must be positive, got ({sx}, {sy})")
        tracks = (self.tracks + 0.5) * np.array([sx, sy], np.float32) - 0.5
        return MotionTracks(tracks=tracks, visible=self.visible.copy(), query_frames=self.query_frames.copy(),
                            frame_indices=list(self.frame_indices))

    @property
    def num_frames(self) -> int:
        return int(self.tracks.shape[0])

    @property
    def num_points(self) -> int:
        return int(self.tracks.shape[1])

    def to_dict(self, encoding: Literal["list", "base64"] = "list") -> dict:
        """JSON-ready form. ``list``: nested lists (float32 values survive a JSON round trip exactly);
        ``base64``: little-endian float32 / uint8 bytes, compact and fast for large track sets."""
        if encoding == "base64":
            return {
                "encoding": "base64", "shape": [self.num_frames, self.num_points],
                "tracks": base64.b64encode(self.tracks.astype("<f4").tobytes()).decode(),
                "visible": base64.b64encode(self.visible.astype(np.uint8).tobytes()).decode(),
                "query_frames": self.query_frames.tolist(), "frame_indices": list(self.frame_indices),
            }
        return {
            "tracks": self.tracks.tolist(),
            "visible": self.visible.tolist(),
            "query_frames": self.query_frames.tolist(),
            "frame_indices": list(self.frame_indices),
        }

    @classmethod
    def from_dict(cls, data: dict) -> MotionTracks:
        """Inverse of :meth:`to_dict` (either encoding)."""
        n = len(data["query_frames"])
        t = len(data["frame_indices"])
        if data.get("encoding") == "base64":
            tracks = np.frombuffer(base64.b64decode(data["tracks"]), dtype="<f4").reshape(t, n, 2)
            visible = np.frombuffer(base64.b64decode(data["visible"]), dtype=np.uint8).reshape(t, n).astype(bool)
        else:
            tracks = np.asarray(data["tracks"], dtype=np.float32).reshape(t, n, 2)
            visible = np.asarray(data["visible"], dtype=bool).reshape(t, n)
        return cls(tracks=tracks.astype(np.float32), visible=visible, query_frames=np.asarray(data["query_frames"]),
                   frame_indices=list(data["frame_indices"]))


@runtime_checkable
class MotionTracker(Protocol):
    """Anything that turns frames and query points into :class:`MotionTracks`."""

    def track(self, frames: np.ndarray, *, grid_size: int | None = None,
              queries: np.ndarray | None = None) -> MotionTracks: ...


def validate_frames(frames: np.ndarray) -> np.ndarray:
    """Check frames are uint8 RGB ``[T,H,W,3]`` with T >= 1; return them as a contiguous array."""
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise ValueError(f"frames must be uint8 [T,H,W,3], got {frames.dtype} {frames.shape}")
    if frames.shape[0] < 1:
        raise ValueError("frames is empty (0 frames): nothing to track")
    if frames.shape[1] < 2 or frames.shape[2] < 2:
        raise ValueError(f"frames are too small to track: {frames.shape[1]}x{frames.shape[2]}")
    return np.ascontiguousarray(frames)


def grid_points(grid_size: int, height: int, width: int) -> np.ndarray:
    """``grid_size**2`` points ``(x, y)`` at the cell centres of a regular grid, row-major, float32; a grid
    finer than the frame's short side is a TrackQueryError (its outer points would lie outside the image)."""
    if not isinstance(grid_size, int | np.integer) or grid_size < 1:
        raise TrackQueryError(f"grid_size must be a positive integer, got {grid_size!r}")
    if grid_size > min(height, width):
        raise TrackQueryError(f"grid_size {grid_size} is finer than the {width}x{height} frame: at most "
                              f"{min(height, width)} (the short side), or its points lie outside the image")
    xs = (np.arange(grid_size) + 0.5) * width / grid_size - 0.5
    ys = (np.arange(grid_size) + 0.5) * height / grid_size - 0.5
    gx, gy = np.meshgrid(xs, ys)
    return np.stack([gx.ravel(), gy.ravel()], axis=1).astype(np.float32)


def resolve_queries(frames_shape: tuple[int, ...], grid_size: int | None,
                    queries: np.ndarray | None) -> np.ndarray:
    """Return validated queries ``[N,3]`` float32 ``(t, x, y)`` from either a grid or explicit rows.

    Exactly one of ``grid_size`` / ``queries`` must be given. Raises :class:`TrackQueryError`
    naming the rows whose frame is outside the clip or whose point is outside the image.
    """
    t, h, w = int(frames_shape[0]), int(frames_shape[1]), int(frames_shape[2])
    if (grid_size is None) == (queries is None):
        raise TrackQueryError("give exactly one of grid_size or queries")
    if grid_size is not None:
        pts = grid_points(grid_size, h, w)
        return np.concatenate([np.zeros((len(pts), 1), np.float32), pts], axis=1)
    q = np.asarray(queries, dtype=np.float64)
    if q.ndim != 2 or q.shape[1] != 3 or q.shape[0] < 1:
        raise TrackQueryError(f"queries must be a non-empty [N,3] array of (t, x, y), got shape {q.shape}")
    if not np.isfinite(q).all():
        bad = np.flatnonzero(~np.isfinite(q).all(axis=1)).tolist()
        raise TrackQueryError(f"queries rows {bad} contain NaN or infinity")
    tq = q[:, 0]
    bad_t = np.flatnonzero((tq != np.round(tq)) | (tq < 0) | (tq > t - 1)).tolist()
    if bad_t:
        raise TrackQueryError(f"queries rows {bad_t} name frames outside the clip (valid t: whole numbers "
                              f"0..{t - 1}; got {q[bad_t[:8], 0].tolist()})")
    x, y = q[:, 1], q[:, 2]
    bad_xy = np.flatnonzero((x < 0) | (x > w - 1) | (y < 0) | (y > h - 1)).tolist()
    if bad_xy:
        raise TrackQueryError(f"queries rows {bad_xy} lie outside the {w}x{h} image "
                              f"(x in [0,{w - 1}], y in [0,{h - 1}]; got "
                              f"{[tuple(row) for row in q[bad_xy[:8], 1:].tolist()]})")
    return q.astype(np.float32)


def fill_lost_positions(tracks: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """``tracks`` ``[T,N,2]`` with every non-finite position replaced by the nearest finite one towards the
    point's query frame (the last reliable estimate in tracking order: forward after the query frame,
    backward before it), or the query point at its own frame. ``queries`` are the ``[N,3]`` ``(t, x, y)``
    rows the tracks were asked for. Returns a float32 copy."""
    out = np.array(tracks, dtype=np.float32)
    bad = ~np.all(np.isfinite(out), axis=-1)
    if not bad.any():
        return out
    qf = np.asarray(queries[:, 0], np.int64)
    cols = np.arange(out.shape[1])
    at_query = bad[qf, cols]
    out[qf[at_query], cols[at_query]] = np.asarray(queries, np.float32)[at_query, 1:3]
    for t in range(1, out.shape[0]):  # after the query frame: the previous frame's (already filled) position
        fill = bad[t] & (t > qf)
        out[t, fill] = out[t - 1, fill]
    for t in range(out.shape[0] - 2, -1, -1):  # before it (backward tracking): the next frame's
        fill = bad[t] & (t < qf)
        out[t, fill] = out[t + 1, fill]
    return out


def tracks_problem(tracks: MotionTracks, num_frames: int, num_points: int | None, *,
                   frame_size: tuple[int, int]) -> str | None:
    """Why ``tracks`` a tracker returned break this module's contract, or None: not ``num_frames`` frames, not
    ``num_points`` points (when the caller knows how many it asked for), a query frame outside the frames, a
    non-finite position (at any frame: backends replace lost positions with `fill_lost_positions`, and a NaN
    fed summaries and overlays silently, e.g. a NaN step never counted as motion, an infinite one always did),
    or one more than `POSITION_BOUND_FRAMES` frame sizes past the ``frame_size`` ``(height, width)`` image."""
    if tracks.num_frames != num_frames:
        return f"the tracker returned {tracks.num_frames} frames for {num_frames} frames"
    if num_points is not None and tracks.num_points != num_points:
        return f"the tracker returned {tracks.num_points} points for {num_points} query points"
    qf = tracks.query_frames
    if qf.size and (qf.min() < 0 or qf.max() >= num_frames):
        return f"the tracker returned query frames outside 0..{num_frames - 1}"
    bad = ~np.isfinite(tracks.tracks).all(axis=-1)
    if bad.any():
        t, n = np.argwhere(bad)[0]
        where = "a tracked (visible)" if tracks.visible[bad].any() else "a lost"
        return (f"the tracker returned non-finite positions at {int(bad.sum())} point-frames (first: point {int(n)}, "
                f"frame {int(t)}; {where} one)")
    return far_positions_problem(tracks.tracks, frame_size)


def far_positions_problem(positions: np.ndarray, frame_size: tuple[int, int]) -> str | None:
    """Why finite ``positions`` ``[T,N,2]`` (x, y) are not tracks of a ``(height, width)`` image: the first
    more than `POSITION_BOUND_FRAMES` frame sizes past it (module docstring), or None."""
    h, w = int(frame_size[0]), int(frame_size[1])
    b = POSITION_BOUND_FRAMES
    x, y = positions[..., 0], positions[..., 1]
    far = (x < -b * w) | (x > w - 1 + b * w) | (y < -b * h) | (y > h - 1 + b * h)
    if not far.any():
        return None
    t, n = np.argwhere(far)[0]
    px, py = (float(v) for v in positions[t, n])
    return (f"the tracker returned positions far outside the {w}x{h} frame at {int(far.sum())} point-frames (first: "
            f"point {int(n)}, frame {int(t)}: ({px:.4g}, {py:.4g})); a position may lie at most "
            f"{b} frame sizes past the image (POSITION_BOUND_FRAMES)")


def require_tracks(tracks: object, num_frames: int, num_points: int | None, *,
                   frame_size: tuple[int, int]) -> MotionTracks:
    """``tracks`` (a tracker's answer on frames of ``frame_size`` ``(height, width)``) when it is MotionTracks
    keeping this module's contract (`tracks_problem`), else a ValueError naming the problem. The one check of a tracker's answer: the agent's
    track node and the tool service report it as ToolFault("motion", "run") with this message,
    `tools.motion.grid` lets it propagate; each had its own copy, and a None answer read differently."""
    if not isinstance(tracks, MotionTracks):
        raise ValueError(f"the tracker returned {type(tracks).__name__} for {num_frames} frames")
    if (problem := tracks_problem(tracks, num_frames, num_points, frame_size=frame_size)) is not None:
        raise ValueError(problem)
    return tracks


def in_bounds(points: np.ndarray, height: int, width: int) -> np.ndarray:
    """bool mask of points ``[...,2]`` inside ``[0, W-1] x [0, H-1]`` (the query range; a tracked point is
    tested with `inside_image`)."""
    x, y = points[..., 0], points[..., 1]
    return (x >= 0) & (x <= width - 1) & (y >= 0) & (y <= height - 1)


def inside_image(points: np.ndarray, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(positions, mask) of tracked points ``[...,2]``: a point is inside the image while it lies on one of its
    pixels, i.e. less than half a pixel past the edge pixels' centres (pixel ``i`` covers ``[i - 0.5, i + 0.5)``);
    such a point is clamped onto ``[0, W-1] x [0, H-1]`` (`in_bounds`, the range queries use), the others (and
    NaN / infinities, never inside) are returned as they are, in a float32 copy.

    Why not `in_bounds` alone: a still point queried on an edge pixel's centre (the agent's fraction 0 or 1
    becomes x = 0 or W-1) comes back from LK at -0.03 or W-1+0.02 (jitter of a few hundredths of a pixel); the
    strict range called that leaving the image, and LK, which never re-acquires a point, reported it lost from
    its first step on (1 to 4 of 16 frames tracked on a still clip). The clamp moves a point by under half a
    pixel and keeps every position in the query range."""
    out = np.array(points, dtype=np.float32)
    x, y = out[..., 0], out[..., 1]
    inside = (x > -0.5) & (x < width - 0.5) & (y > -0.5) & (y < height - 0.5)
    out[inside] = np.clip(out[inside], 0, np.array([width - 1, height - 1], np.float32))
    return out, inside
