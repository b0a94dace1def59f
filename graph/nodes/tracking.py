"""Motion tracking behind track_motion (and reflect's automatic grid track): the tracked frames, the
shared track jobs, the tracker's frames and the overlays (paper Sec. 3.2; the tool is `graph.nodes.evidence`).

Decisions where the issue was silent:
- Tracks are computed by one shared job per (video, frames, points) (`FrameStore.shared_job`), so the
  speculative grid track (`AgentConfig.motion_prefetch`, started by assess) and a matching
  track_motion call are one computation; overlays and the summary are rendered per call.
- A failed speculative grid track decides nothing by itself: the run is ineligible when a track it uses fails (a
  track_motion call, or reflect's automatic grid track without inspection, whose failure is always used), and a
  failed speculative job is tried once more when asked for (`FrameStore.atracks`). With the full preset a broken
  tracker therefore makes ineligible the clips whose model asked for a track, and scores the others: each reward
  comes from the evidence its run gathered, and a run that never asked for a track gathered the same evidence, and
  gets the same reward, as with a working tracker (the model decides before any track exists; the tool list it is
  offered is the same). The paper's rule (a required tool's failure makes the run ineligible, never a model-only
  fallback) is about evidence a run needs: a track the model did not ask for is no part of its evidence, and making
  the run ineligible for it would make `motion_prefetch` (a speed setting) change results. A tracker that cannot
  load stops the commands that score many clips, and the trainer, at their start (`graph.context.preload_tools`).
- track_motion's points lie on start_frame, as its schema says: they are queried on that frame's
  position among the tracked frames (`query_index`), and both trackers follow them both ways. They
  were queried on the first tracked frame, so for end_frame < start_frame (the stretch is tracked in
  clip order) they landed on the earlier frame, and a one-frame stretch at the clip's last frame
  (widened to n-2..n-1) put them on frame n-2.
- A grid (no points given) is queried on the first, middle and last tracked frames, and only the later
  points that add coverage are kept (`tools.motion.grid`): on the first frame alone it never tracked an
  object entering the view later, and a clip full of motion read "0 points moved". A static scene keeps
  its `GRID_SIZE`**2 points. The grid's job key stays that of a grid (points empty, query_t 0), so the
  speculative grid track and a grid track_motion call still share one computation. On a clip whose short
  side is under `GRID_SIZE` pixels the grid has the short side's size (`grid_side`): an 8x8 grid does not fit
  there, and the TrackQueryError made every such run ineligible.
- The track job's key and the overlay key hold what decides the tracks besides the clip, frames and points: the
  tracker (`ToolProvider.tracker_id`: CoTracker3 and its weights, LK and its settings, an injected object) and
  `track_short_side`, as the surprise key holds its short side. Agents with other tool settings sharing one frame
  cache took each other's tracks.
- The tracks carry the clip's frame numbers (`MotionTracks.frame_indices`), so the summary names clip
  frames; it named positions among the tracked frames (track_motion over frames 40..60 reported motion
  "in frames 3-8").
- The tracked frames are in increasing clip order (`track_frames` sorts a reversed stretch, the observed sample
  is `uniform_indices`); `_compute_tracks` refuses any other order (`tools.sampling.order_problem`, a fault of
  "motion"), as the tool service does: a tracker follows its frames in the order given, so a track over
  frames out of order jumped back and forth in the clip.
- Size: the tracker gets frames whose short side is at most `track_short_side` (576; CoTracker3 works at
  384x512 anyway) and its tracks are mapped back to the clip's pixels; overlays are drawn on the frames
  at the size they are sent (a 1080p overlay drawn at full size shrank to nothing at 512 pixels), and
  the summary gives positions and displacements in pixels of the frames as sent, with that size (the
  model read full-size pixels beside 512-pixel images, and in "pixels" coordinates wrote points back in
  the wrong scale). Positions (track ends, region boxes) are written in the model's convention
  (`AgentConfig.coordinates`, pixels of the frames as sent for "pixels"; `MotionSummary.text`): they were
  pixels whatever the convention, and a model writing fractions or thousandths copied them back wrong.
- Failures: whatever tracking raises that is not already a ToolFault, a VideoError or JobCancelled becomes
  ToolFault("motion", "run") (`_as_fault`), so the run is ineligible with the tool named, wherever it
  came from (the tracker, mapping its tracks back to the clip, the tracker's frames, the overlays). A read of the
  clip's frames the overlays are drawn on is the clip's (read outside the overlays' own catch-all): a cut clip
  failing there was recorded as the motion tool's outage, and --retry-ineligible scored it again on every run.
  Tracks that break the tracker contract (`tools.motion.base.require_tracks`: not MotionTracks, wrong frame
  or point count, a NaN or infinite position, one far outside the frame) are such a fault too, the problem as its message: a NaN step
  never counted as motion and an infinite one always did, so an injected tracker's bad output read as
  evidence.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import numpy as np

from graph.context import RunContext
from graph.state import AgentState
from graph.workers import JobCancelled, run_blocking
from tools.errors import ToolFault, run_tool

TRACK_FRAMES = 32


def track_frames(n: int, start: int, end: int, limit: int = TRACK_FRAMES) -> list[int]:
    """Frames `track_motion` tracks for the stretch (start, end): at most `limit`, uniform over the
    stretch clamped to the clip (a one-frame stretch widens to two frames). Memoised: every inspect
    round and reflect recompute the frames of each earlier track call when they rebuild the conversation."""
    return list(_track_frames(int(n), int(start), int(end), int(limit)))


@functools.lru_cache(maxsize=4096)
def _track_frames(n: int, start: int, end: int, limit: int) -> tuple[int, ...]:
    start, end = max(0, min(start, n - 1)), max(0, min(end, n - 1))
    if end < start:
        start, end = end, start
    if end == start:
        end = min(n - 1, start + 1)
        start = max(0, end - 1)
    count = min(limit, end - start + 1)
    return tuple(sorted({int(round(x)) for x in np.linspace(start, end, count)}))


def query_index(n: int, start: int, end: int, limit: int = TRACK_FRAMES) -> int:
    """Position in `track_frames(n, start, end)` of the frame `track_motion`'s points lie on: the
    requested start_frame clamped to the clip, which the tracked frames always contain (a reversed
    stretch keeps its frames sorted, so this is the later end; a one-frame stretch widened to two
    frames keeps the requested one). 0 for an empty clip."""
    idx = track_frames(n, start, end, limit)
    frame = max(0, min(int(start), int(n) - 1))
    return idx.index(frame) if frame in idx else 0


GRID_SIZE = 8
"""Side of the point grid tracked when no points are given (GRID_SIZE**2 points on each of the stretch's
query frames, `tools.motion.grid`; the speculative and reflect tracks); `grid_side` on frames smaller than that."""


def grid_side(height: int, width: int) -> int:
    """The grid side tracked on ``height x width`` frames: `GRID_SIZE`, or the short side when that is smaller
    (a grid finer than the frame is refused, `tools.motion.base.grid_points`: the clip's run was ineligible)."""
    return max(1, min(GRID_SIZE, int(height), int(width)))

def _track_request(ctx: RunContext, video: str, idx: list[int], points: list[list[float]],
                   query_t: int = 0) -> tuple[tuple, Any]:
    """(FrameStore track-job key, the computation) of tracking `points` given on `idx[query_t]` (or a
    grid on the stretch's first, middle and last frames, whatever `query_t`, so a grid call shares the
    speculative grid track) over `idx`."""
    query_t = int(query_t) if points else 0
    key = ("tracks", ctx.frames.current(video), tuple(idx), tuple(tuple(float(v) for v in p) for p in points),
           query_t, ctx.tools.tracker_id, ctx.tools.track_short_side)  # what decides the tracks (module docstring)
    return key, functools.partial(_compute_tracks, ctx, video, idx, points, query_t)


def prefetch_tracks(ctx: RunContext, video: str, frames: int, sample: list[int]) -> None:
    """Speculatively start, at priority "later", the grid track a run is most likely to need (config
    `motion_prefetch="grid"`): the whole clip when the model may call track_motion (its default
    stretch 0..n-1 without points), else the sampled frames reflect tracks automatically."""
    cfg = ctx.config
    if cfg.motion and cfg.motion_prefetch == "grid":
        idx = track_frames(frames, 0, frames - 1) if cfg.visual_verify else list(sample)
        ctx.frames.shared_job(*_track_request(ctx, video, idx, []), "later", ctx.tools.tracker_lane)


class TrackView(NamedTuple):
    """What one track shows: the overlays of the frames asked for, the summary, and the points tracked."""

    blocks: list[dict]
    """Overlay content blocks of the shown frames."""
    summary: str
    """Motion summary text (`tools.motion.summarize_tracks`)."""
    points: int
    """Points tracked: those given, or for a grid those kept (GRID_SIZE**2 up to GRID_QUERY_FRAMES times that:
    later query frames' points stay where they add coverage), so it is read from the tracks, not assumed."""


async def track_overlays(state: AgentState, ctx: RunContext, idx: list[int], points: list[list[float]],
                         shown: list[int], *, query_t: int = 0) -> TrackView:
    """Track `points` given on frame `idx[query_t]` (or a grid) over frames `idx` once per run; returns
    the overlay blocks of `shown`, the summary and the number of points tracked."""
    query_t = int(query_t) if points else 0
    key = ("overlay", ctx.frames.current(state["video"]), tuple(idx), tuple(tuple(p) for p in points), tuple(shown),
           query_t, ctx.config.coordinates,  # the summary is written in the model's coordinates
           ctx.tools.tracker_id, ctx.tools.track_short_side)  # drawn from the tracks: what decides them
    cached: TrackView | None = ctx.frames.get_extra(key)
    if cached is None:
        try:
            tracks = await ctx.frames.atracks(*_track_request(ctx, state["video"], idx, points, query_t),
                                              ctx.tools.tracker_lane)
            cached = await run_blocking(_render_tracks, state, ctx, idx, tracks, shown)
        except Exception as exc:
            if (fault := _as_fault(exc)) is None:
                raise
            raise fault from exc
        ctx.frames.put_extra(key, cached)
    return cached


def _as_fault(exc: Exception) -> ToolFault | None:
    """What tracking raised as the tool's failure, ToolFault("motion", "run") (a ValueError mapping the tracks
    back to the clip, a bad frame size), or None for what is recorded as it is: a ToolFault, a VideoError (the
    clip) or JobCancelled (the clip left the frame cache)."""
    from tools.video import VideoError

    if isinstance(exc, ToolFault | VideoError | JobCancelled):
        return None
    return ToolFault("motion", "run", f"{type(exc).__name__}: {exc}")


def _compute_tracks(ctx: RunContext, video: str, idx: list[int], points: list[list[float]],
                    query_t: int = 0) -> Any:
    """Tracks in the clip's pixels, computed on frames whose short side is at most `track_short_side`;
    `points` lie on frame `idx[query_t]` (both backends track both ways from a mid-stretch query); without
    points, the grid of `tools.motion.grid` (first, middle and last frame; redundant later points dropped)."""
    from tools.motion import MotionTracks
    from tools.motion.base import require_tracks
    from tools.motion.grid import grid_tracks
    from tools.sampling import order_problem

    if (backwards := order_problem(idx)) is not None:  # the tracker follows them in this order (module docstring)
        raise ValueError(f"frames to track go backwards: {backwards}")
    tracker = ctx.tools.tracker()
    meta = ctx.frames.meta(video)
    frames = ctx.frames.scaled_frames(video, idx, ctx.tools.track_short_side)
    frames.flags.writeable = False  # unchanged from here on: LK's second grid call reuses its grey frames
    h, w = frames.shape[1:3]

    def track(queries: np.ndarray) -> MotionTracks:
        tracks = run_tool("motion", tracker.track, frames, queries=queries)  # a failure: "<type>: <message>"
        try:
            return require_tracks(tracks, len(idx), len(queries), frame_size=(h, w))
        except ValueError as exc:  # a broken answer: the problem as the message (module docstring)
            raise ToolFault("motion", "run", str(exc)) from exc

    if points:  # fractions of the frame, checked and clamped by _track
        # 0 and 1 are the edge pixels' centres, so every point is inside the image (tools/coords.py's rule)
        tracks = track(np.array([[float(query_t), p[0] * (w - 1), p[1] * (h - 1)] for p in points], dtype=np.float32))
    else:  # the grid on the stretch's first, middle and last frames, later ones where they add coverage
        tracks = grid_tracks(track, frames.shape, grid_side(h, w))
    if (w, h) != (meta.width, meta.height):
        tracks = tracks.rescaled(meta.width / w, meta.height / h)
    # the clip's frame numbers: the summary's "motion in frames ..." must name frames of the clip,
    # not positions among the (at most 32) tracked ones
    return dataclasses.replace(tracks, frame_indices=list(idx))


def _render_tracks(state: AgentState, ctx: RunContext, idx: list[int], tracks: Any,
                   shown: list[int]) -> TrackView:
    """The overlay blocks of the `shown` frames, the motion summary text and the points tracked."""
    from tools.coords import shown_size
    from tools.motion import draw_tracks_resized, summarize_tracks
    from tools.video import resize_long_side

    meta = state["meta"]
    h, w = int(meta["height"]), int(meta["width"])
    sw, sh = shown_size(w, h, ctx.frames.long_side)
    # the clip's read, outside the catch-all below: its VideoError is the clip's fault (and JobCancelled the
    # frame cache's), as `_as_fault` keeps them; in it, a cut clip read as the motion tool's outage
    full = ctx.frames.frame_list(state["video"], shown) if shown else []
    try:  # the summary's pixels are those of the frames as the model sees them
        seen = tracks if (sw, sh) == (w, h) else tracks.rescaled(sw / w, sh / h)
        # positions in the model's own convention, so it can copy one into its next call (tools.motion.summary)
        summary = summarize_tracks(seen, frame_size=(sh, sw)).text(ctx.config.coordinates, (sw, sh))
        pos = [idx.index(f) for f in shown]
        overlays = None
        if pos:  # drawn at the size the model sees (drawn at full size, a 1080p overlay shrank to nothing)
            small = [resize_long_side(f, ctx.frames.long_side) for f in full]
            overlays = draw_tracks_resized(small, seen, pos, (sh, sw))  # `seen` is already at that size
    except Exception as exc:  # tracks of the wrong shape from a custom tracker: a fault, not a crash
        raise ToolFault("motion", "run", f"{type(exc).__name__}: {exc}") from exc
    clip = ctx.frames.meta(state["video"])
    labels = [clip.label(f) + " (motion-track overlay)" for f in shown]
    blocks = ctx.frames.array_blocks(overlays, labels) if overlays is not None else []
    return TrackView(blocks, summary, int(tracks.tracks.shape[1]))
