"""Grid tracks over a stretch of frames: the grid is queried on several frames, not on the first one only.

A ``grid_size`` track (`tools.motion.base.resolve_queries`) places its points on frame 0 of the tracked
frames. An object that enters the view later is then never tracked: at frame 0 the grid points lie on the
background it will cover, and once it slides over them they are lost (LK's patch error and
forward-backward check, CoTracker3's visibility), so a clip full of motion read "0 points moved". The same
held for anything that appears (is uncovered, is brought in) after the stretch's first frame.

Decisions where the issue was silent:
- The grid is queried on `GRID_QUERY_FRAMES` (3) frames spread over the stretch: the first, the middle
  and the last (`grid_query_frames`), the same cell centres (`grid_points`) on each. Both backends
  follow a point queried mid-stretch both ways (LK from its query frame forwards and backwards, CoTracker3
  with ``backward_tracking=True``), so a point that lies on the entering object at the last frame is
  followed back to where it came in. Three frames, not every frame: an object that is in view for less
  than half the stretch and on none of the three frames is still missed.
- A later frame's grid is asked for only where it adds coverage (`grid_tracks`): the first frame's grid is
  tracked, then each later query frame gets only the cell centres no tracked point is near at that frame
  (the `drop_redundant` rule, applied before tracking instead of after). LK's time is linear in its
  points and querying all three grids at once (192 points, each also matched against its query frame)
  made the agent's background grid track about four times dearer: the 16-clip concurrency benchmark
  went from 1.5 to 2.2 times its critical path on 2 cores. A static or panning scene now costs one
  64-point track, as before the later grids; a scene with motion, one call more for the uncovered cells
  of both later frames (an LK call's cost is mostly per image, not per point; for CoTracker3 it is a
  forward pass more, and since its points attend to one another its tracks can differ slightly from a
  single call's).
- Only the later points that add coverage are kept (`drop_redundant`): a point queried on frame ``k`` is
  dropped when a kept point of an earlier query frame is tracked (visible) within ``radius`` of it at
  frame ``k``; it would follow the same surface. The agent uses half a grid cell's diagonal: a whole grid,
  however far it has been shifted (a camera pan), has a point that close to every cell centre, so a
  static or panning scene keeps exactly the first frame's ``grid_size**2`` points (same order, same
  tracks for LK, whose points are independent) and only where earlier points were lost or moved away do
  later ones stay. A later point tracked in no frame but its own is dropped too: no step of it has both
  ends tracked and its net displacement is 0, so it adds no evidence, only untracked point-frames.
- This lives beside the trackers, not in them: a tracker's ``grid_size`` keeps its documented meaning (a
  grid on frame 0, DESIGN.md's protocol, the tool service's ``grid_size``), and `track_window_grid` hands
  any tracker (an injected one, the tool-service client) explicit queries, which every backend takes. The
  tool service gives this grid to a request with ``grid_frames: "window"`` (`tools.service_params`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from tools.motion.base import MotionTracker, MotionTracks, grid_points, require_tracks, validate_frames

GRID_QUERY_FRAMES = 3
"""Frames of a stretch its grid is queried on: the first, the middle and the last (module docstring)."""


def grid_query_frames(num_frames: int, count: int = GRID_QUERY_FRAMES) -> list[int]:
    """``count`` frames spread evenly over ``num_frames`` frames, first and last included (fewer for a
    shorter stretch: each frame once)."""
    if num_frames < 1 or count < 1:
        raise ValueError(f"need at least one frame and one query frame, got {num_frames} frames, count {count}")
    return sorted({int(round(x)) for x in np.linspace(0, num_frames - 1, min(count, num_frames))})


def grid_radius(grid_size: int, height: int, width: int) -> float:
    """Half the diagonal of a grid cell: every cell centre is this close to some point of a whole grid,
    however far that grid has been shifted (`drop_redundant`)."""
    return 0.5 * float(np.hypot(height / grid_size, width / grid_size))


def covered(points: np.ndarray, seen: np.ndarray, radius: float) -> np.ndarray:
    """bool ``[N]``: each of ``points`` ``[N,2]`` lies closer than ``radius`` pixels to some point of ``seen``
    ``[M,2]`` (positions at one frame; none is covered when nothing is seen). The one coverage rule of this
    module: `grid_tracks` asks a later frame's grid only for the cells it leaves uncovered, `drop_redundant`
    drops a later point an earlier kept one covers, so the two-call grid equals the all-at-once one. Strictly
    closer: a cell centre exactly `grid_radius` from the nearest point (a grid shifted by exactly half a cell
    both ways) is not covered, and then asked for again."""
    if not len(seen) or not len(points):
        return np.zeros(len(points), bool)
    return np.linalg.norm(points[:, None] - seen[None], axis=-1).min(axis=1) < radius


def drop_redundant(tracks: MotionTracks, radius: float) -> MotionTracks:
    """``tracks`` without the points of later query frames that add nothing (module docstring): one with an
    earlier-queried kept point tracked within ``radius`` pixels of it at its query frame, or one tracked in
    no frame but its own. The points of the earliest query frame are all kept; order is kept."""
    if not radius > 0:
        raise ValueError(f"radius must be a positive number of pixels, got {radius!r}")
    qf = tracks.query_frames
    if qf.size == 0:
        return tracks
    keep = qf == qf.min()
    seen_elsewhere = (tracks.visible.sum(axis=0) - tracks.visible[qf, np.arange(len(qf))]) > 0
    for k in np.unique(qf)[1:]:
        group = np.flatnonzero(qf == k)
        cover = np.flatnonzero(keep & (qf < k) & tracks.visible[k])
        keep[group] = ~covered(tracks.tracks[k, group], tracks.tracks[k, cover], radius) & seen_elsewhere[group]
    if keep.all():
        return tracks
    # replace, not a new MotionTracks: a tracker's own subclass (and its methods) is kept
    return dataclasses.replace(tracks, tracks=tracks.tracks[:, keep], visible=tracks.visible[:, keep],
                               query_frames=qf[keep], frame_indices=list(tracks.frame_indices))


def grid_tracks(track: Callable[[np.ndarray], MotionTracks], frames_shape: tuple[int, ...], grid_size: int,
                count: int = GRID_QUERY_FRAMES) -> MotionTracks:
    """The window grid's tracks, later query frames' points asked for only where they add coverage (module
    docstring): ``track(queries)`` tracks ``[N,3]`` ``(t, x, y)`` queries on the frames (checked by the
    caller). It is called once for the first frame's grid and, when some later query frame has cell
    centres that none of those tracks is within `grid_radius` of, once more for all of those; then
    `drop_redundant` drops a last-frame point a kept middle-frame point covers and a later point tracked in
    no frame but its own. For LK, whose points are independent, the result equals tracking every query
    frame's grid at once and then `drop_redundant`."""
    t, h, w = int(frames_shape[0]), int(frames_shape[1]), int(frames_shape[2])
    pts = grid_points(grid_size, h, w)
    radius = grid_radius(grid_size, h, w)
    first, *later = grid_query_frames(t, count)
    tracks = track(_queries_at(first, pts))
    needed = []
    for k in later:
        need = pts[~covered(pts, tracks.tracks[k][tracks.visible[k]], radius)]
        if len(need):
            needed.append(_queries_at(k, need))
    if not needed:
        return tracks
    more = track(np.concatenate(needed))  # one call: a call's cost is mostly per image, not per point
    joined = dataclasses.replace(
        tracks, tracks=np.concatenate([tracks.tracks, more.tracks], axis=1),
        visible=np.concatenate([tracks.visible, more.visible], axis=1),
        query_frames=np.concatenate([tracks.query_frames, more.query_frames]), frame_indices=list(tracks.frame_indices))
    return drop_redundant(joined, radius)


def _queries_at(frame: int, pts: np.ndarray) -> np.ndarray:
    """``[N,3]`` float32 queries ``(frame, x, y)`` of the points ``pts`` ``[N,2]``."""
    return np.concatenate([np.full((len(pts), 1), frame, np.float32), pts.astype(np.float32)], axis=1)


def track_window_grid(tracker: MotionTracker, frames: np.ndarray, grid_size: int,
                      count: int = GRID_QUERY_FRAMES) -> MotionTracks:
    """`grid_tracks` of ``tracker`` on ``frames``: the ``grid_size`` grid queried on `grid_query_frames`,
    later frames' points only where they add coverage. Tracks that break the tracker contract
    (`require_tracks`, checked against the queries asked for) are a ValueError naming the problem."""
    frames = validate_frames(frames)

    def track(queries: np.ndarray) -> MotionTracks:
        return require_tracks(tracker.track(frames, queries=queries), frames.shape[0], len(queries),
                              frame_size=frames.shape[1:3])

    return grid_tracks(track, frames.shape, grid_size, count)
