"""Inspection tools and their execution: view_frames, view_crop, track_motion (paper Sec. 3.2).

Access policy: clips of at most 81 frames may view any frame; longer clips may view the initial
uniform sample plus at most `nearby_extra` (16) more frames: each frame the model asks for outside the
sample is added as it is (first come, first served), and once the allowance is spent a request for
another frame shows the nearest allowed frame instead (the result text says so). An earlier version
filled the whole allowance with neighbours of the first frame asked for, so one request spent all 16
frames (and 16 images of the frame budget, 16 crops for one view_crop) on frames nobody asked for.
A frame budget caps the images all tool calls of a run return.
Invalid crop boxes fall back to the full frame and the tool result says so (checked rounded, as cropped).

Decisions where the issue was silent:
- Requests are trimmed (never refused) to the access policy and the budget; the result text lists
  what was dropped or substituted.
- track_motion reads up to 32 frames of the requested stretch (the tracker is a tool, not a view);
  it returns a text summary plus overlays of up to 4 tracked frames, which count against the frame
  budget but not against the nearby-extra allowance (they are rendered evidence, not new views).
- Overlays are cached in the frame store under the tracked frames and points; the conversation is rebuilt
  from stored references, recomputing an evicted overlay deterministically. The exchange keeps the points
  as tracked (fractions of the frame, clamped, malformed ones left out) and their frame (`points`,
  `query_frame`): replayed from the raw args, per_mille or pixel points and points off the frame failed
  the tracker (the run ineligible) and a point [x] raised IndexError.
- Tracks are computed by one shared job per (video, frames, points) (`FrameStore.shared_job`), so the
  speculative grid track (`AgentConfig.motion_prefetch`, started by assess) and a matching
  track_motion call are one computation; overlays and the summary are rendered per call.
- track_motion's points lie on start_frame, as its schema says: they are queried on that frame's
  position among the tracked frames (`query_index`), and both trackers follow them both ways. They
  were queried on the first tracked frame, so for end_frame < start_frame (the stretch is tracked in
  clip order) they landed on the earlier frame, and a one-frame stretch at the clip's last frame
  (widened to n-2..n-1) put them on frame n-2. A grid stays on the first tracked frame.
- The tracks carry the clip's frame numbers (`MotionTracks.frame_indices`), so the summary names clip
  frames; it named positions among the tracked frames (track_motion over frames 40..60 reported motion
  "in frames 3-8").
- Size: the tracker gets frames whose short side is at most `track_short_side` (576; CoTracker3 works at
  384x512 anyway) and its tracks are mapped back to the clip's pixels; overlays are drawn on the frames
  at the size they are sent (a 1080p overlay drawn at full size shrank to nothing at 512 pixels), and
  the summary gives positions and displacements in pixels of the frames as sent, with that size (the
  model read full-size pixels beside 512-pixel images, and in "pixels" coordinates wrote points back in
  the wrong scale).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, Field

from graph.context import RunContext
from graph.state import AgentState, ToolExchange
from graph.workers import run_blocking
from tools.errors import ToolFault, run_tool

TRACK_FRAMES = 32
OVERLAY_FRAMES = 4


class view_frames(BaseModel):  # noqa: N801 - tool names are snake_case for the model
    """View original frames of the clip by index."""

    frames: list[int] = Field(min_length=1, max_length=16, description="Frame indices (0-based).")


class view_crop(BaseModel):  # noqa: N801
    """View a zoomed region of one frame. box = [x0, y0, x1, y1] in the coordinates the instructions give."""

    frame: int = Field(ge=0, description="Frame index (0-based).")
    box: list[float] = Field(min_length=4, max_length=4, description="[x0, y0, x1, y1] (see the instructions).")


class track_motion(BaseModel):  # noqa: N801
    """Track points through a stretch of frames; returns a motion summary and track overlays."""

    start_frame: int = Field(ge=0, description="First frame of the stretch.")
    end_frame: int = Field(ge=0, description="Last frame of the stretch.")
    points: list[list[float]] = Field(default_factory=list, max_length=32,
                                      description="[x, y] points on start_frame (see the instructions); "
                                                  "empty = grid.")


@functools.cache
def _spec(tool: type[BaseModel]) -> dict[str, Any]:
    return convert_to_openai_tool(tool)


def tool_specs(motion: bool) -> list[dict[str, Any]]:
    """OpenAI tool specs bound to the inspect model (converted once per process, then cached)."""
    tools = [view_frames, view_crop, track_motion] if motion else [view_frames, view_crop]
    return [_spec(t) for t in tools]


def access_text(n: int, sample: list[int], extra: int) -> str:
    """The access policy in words (for the prompts)."""
    if n <= 81:
        return f"any frame 0..{n - 1}"
    return (f"the initial sample {sample} plus at most {extra} extra frames near the frames you reference "
            "(requests for other frames are answered with nearby frames)")


def used_frames(exchanges: list[ToolExchange]) -> int:
    """Frames returned so far by inspection tools (budget accounting)."""
    return sum(len(e.get("frames", [])) for e in exchanges)


def allowed(state: AgentState, ctx: RunContext, exchanges: list[ToolExchange],
            requested: list[int]) -> tuple[list[int], list[str]]:
    """Frames to show for a request under the access policy and budget, plus notes."""
    from tools.video import ALL_FRAMES_LIMIT

    n = int(state["meta"]["frames"])
    notes: list[str] = []
    valid = [f for f in dict.fromkeys(int(r) for r in requested) if 0 <= f < n]
    if len(valid) < len(set(requested)):
        notes.append(f"frames outside 0..{n - 1} dropped")
    if n > ALL_FRAMES_LIMIT:
        sample = list(state.get("sample", []))
        seen = {f for e in exchanges if not e.get("overlay") for f in e.get("frames", [])}
        extra_used = seen - set(sample)
        known = set(sample) | extra_used
        ok = [f for f in valid if f in known]
        other = [f for f in valid if f not in known]
        if other:
            room = max(0, ctx.config.nearby_extra - len(extra_used))
            added, rest = other[:room], other[room:]
            if added:
                notes.append(f"frames {added} added from the extra-frame allowance "
                             f"({room - len(added)} of {ctx.config.nearby_extra} left)")
            if rest:
                nearest = sorted({min(known, key=lambda k: (abs(k - f), k)) for f in rest}) if known else []
                notes.append(f"frames {rest} are outside the allowed set (extra-frame allowance used); "
                             f"showing the nearest allowed frames {nearest}")
                ok += nearest
            ok = sorted(set(ok) | set(added))
        valid = ok
    room = ctx.config.frame_budget - used_frames(exchanges)
    if len(valid) > room:
        notes.append(f"frame budget: showing {max(room, 0)} of {len(valid)} frames")
        valid = valid[:max(room, 0)]
    return valid, notes


async def execute(state: AgentState, ctx: RunContext, exchanges: list[ToolExchange], rnd: int, call_id: str,
                  name: str, args: dict[str, Any]) -> ToolExchange:
    """Run one tool call; returns its exchange record (references and text only)."""
    base = ToolExchange(round=rnd, call_id=call_id, name=name, args=args, frames=[], box=None, overlay=False)
    try:
        if name == "view_frames":
            request = view_frames.model_validate(args)
            frames, notes = allowed(state, ctx, exchanges, request.frames)
            return {**base, "frames": frames, "text": _text(f"showing frames {frames}", notes)}
        if name == "view_crop":
            return await _crop(state, ctx, exchanges, base, view_crop.model_validate(args))
        if name == "track_motion" and ctx.config.motion:
            return await _track(state, ctx, exchanges, base, track_motion.model_validate(args))
    except ValueError as exc:  # pydantic ValidationError included: bad arguments are the model's to fix
        return {**base, "text": f"invalid arguments for {name}: {str(exc)[:300]}"}
    names = [t["function"]["name"] for t in tool_specs(ctx.config.motion)]
    return {**base, "text": f"unknown tool {name!r}; available: {names}"}


_COORDINATES = {
    "unit": "as fractions of the frame's width and height (0..1; [0, 0, 1, 1] is the whole frame)",
    "per_mille": "in thousandths of the frame's width and height (0..1000; [0, 0, 1000, 1000] is the whole "
                 "frame)",
}


def coordinates_text(ctx: RunContext, meta: dict[str, Any]) -> str:
    """How the inspect / plan prompts ask for boxes and points (`AgentConfig.coordinates`)."""
    if ctx.config.coordinates == "pixels":
        w, h = _shown(ctx, meta)
        return f"in pixels of the frames as you see them ({w}x{h}; [0, 0, {w}, {h}] is the whole frame)"
    return _COORDINATES[ctx.config.coordinates]


def _shown(ctx: RunContext, meta: dict[str, Any]) -> tuple[int, int]:
    from tools.coords import shown_size

    return shown_size(int(meta["width"]), int(meta["height"]), ctx.frames.long_side)


def _unit(ctx: RunContext, meta: dict[str, Any], values: list[float]) -> list[float]:
    """A box or point the model wrote, as fractions of the frame."""
    from tools.coords import to_unit_coords

    return to_unit_coords(values, ctx.config.coordinates, _shown(ctx, meta))  # type: ignore[arg-type]


def _fmt(values: list[float]) -> str:
    """A box or point as the model wrote it (`[250, 250, 750, 750]`, not `[250.0, ...]`)."""
    return "[" + ", ".join(f"{v:g}" for v in values) + "]"


def _text(head: str, notes: list[str]) -> str:
    return head + ("" if not notes else " (" + "; ".join(notes) + ")")


async def _crop(state: AgentState, ctx: RunContext, exchanges: list[ToolExchange], base: ToolExchange,
                request: view_crop) -> ToolExchange:
    from tools.video import crop_key, normalize_crop

    frames, notes = allowed(state, ctx, exchanges, [request.frame])
    coordinates = ctx.config.coordinates
    crop = normalize_crop(tuple(_unit(ctx, state["meta"], request.box)))
    # checked as the frame store crops it, rounded (crop_frame checks again: a side just over 0.02 that
    # rounding took under it raised ValueError there, the run ineligible, instead of falling back here)
    if not crop.fallback:
        crop = normalize_crop(crop_key(crop.box))
    box = None if crop.fallback else [float(b) for b in crop.box]
    if crop.fallback:
        if coordinates != "unit":
            why = f"{crop.reason}, read as {coordinates} {_fmt(request.box)}"
        elif any(v > 1 for v in request.box):
            why = (f"{crop.reason}; a model that writes pixels or thousandths needs RAA_COORDINATES / "
                   "AgentConfig.coordinates")
        else:
            why = str(crop.reason)
        notes.append(f"invalid crop box {_fmt(request.box)} ({why}); showing the full frame")
    head = f"frame {frames[0]} " + ("full frame" if box is None else f"crop {_fmt(request.box)}") if frames else "no frame shown"
    return {**base, "frames": frames, "box": box, "text": _text(head, notes)}


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


async def _track(state: AgentState, ctx: RunContext, exchanges: list[ToolExchange], base: ToolExchange,
                 request: track_motion) -> ToolExchange:
    from tools.video import uniform_subset

    n = int(state["meta"]["frames"])
    idx = track_frames(n, request.start_frame, request.end_frame)
    query_t = query_index(n, request.start_frame, request.end_frame)
    room = ctx.config.frame_budget - used_frames(exchanges)
    k = max(0, min(OVERLAY_FRAMES, room, len(idx)))
    shown = uniform_subset(idx, k)
    notes = [] if k >= min(OVERLAY_FRAMES, len(idx)) else [f"frame budget: {k} overlay frames"]
    points, point_notes = track_points(ctx, state["meta"], request.points)
    _, summary = await track_overlays(state, ctx, idx, points, shown, query_t=query_t)
    # the points as tracked and their frame: exchange_blocks replays the overlays from these, not from `args`
    return {**base, "frames": shown, "overlay": True, "points": points, "query_frame": idx[query_t],
            "text": _text(f"tracked frames {idx[0]}..{idx[-1]} ({len(idx)} frames); overlays on {shown}",
                          notes + point_notes) + "\n" + summary}


def track_points(ctx: RunContext, meta: dict[str, Any], raw: list[list[float]]) -> tuple[list[list[float]], list[str]]:
    """(track_motion's points as fractions of the frame, clamped to it, those not [x, y] left out; notes)."""
    points, outside, notes = [], [], []
    for p in raw:
        if len(p) != 2:
            notes.append(f"point {_fmt(p)} is not [x, y]; left out")
            continue
        unit = _unit(ctx, meta, p)
        if not all(-1e-6 <= v <= 1 + 1e-6 for v in unit):
            outside.append(p)
        points.append([min(max(float(v), 0.0), 1.0) for v in unit])
    if outside:
        notes.append(f"points {', '.join(_fmt(p) for p in outside)} lie outside the frame; moved to its edge")
    return points, notes


def _track_request(ctx: RunContext, video: str, idx: list[int], points: list[list[float]],
                   query_t: int = 0) -> tuple[tuple, Any]:
    """(FrameStore track-job key, the computation) of tracking `points` given on `idx[query_t]` (or a
    grid on `idx[0]`, whatever `query_t`, so a grid call shares the speculative grid track) over `idx`."""
    query_t = int(query_t) if points else 0
    key = ("tracks", ctx.frames.current(video), tuple(idx), tuple(tuple(float(v) for v in p) for p in points),
           query_t)
    return key, functools.partial(_compute_tracks, ctx, video, idx, points, query_t)


def prefetch_tracks(ctx: RunContext, video: str, frames: int, sample: list[int]) -> None:
    """Speculatively start, at priority "later", the grid track a run is most likely to need (config
    `motion_prefetch="grid"`): the whole clip when the model may call track_motion (its default
    stretch 0..n-1 without points), else the sampled frames reflect tracks automatically."""
    cfg = ctx.config
    if cfg.motion and cfg.motion_prefetch == "grid":
        idx = track_frames(frames, 0, frames - 1) if cfg.visual_verify else list(sample)
        ctx.frames.shared_job(*_track_request(ctx, video, idx, []), "later", ctx.tools.lane)


async def track_overlays(state: AgentState, ctx: RunContext, idx: list[int], points: list[list[float]],
                         shown: list[int], *, query_t: int = 0) -> tuple[list[dict], str]:
    """Track `points` given on frame `idx[query_t]` (or a grid) over frames `idx` once per run; returns
    (overlay blocks of `shown`, summary)."""
    query_t = int(query_t) if points else 0
    key = ("overlay", ctx.frames.current(state["video"]), tuple(idx), tuple(tuple(p) for p in points), tuple(shown),
           query_t)
    cached = ctx.frames.get_extra(key)
    if cached is None:
        tracks = await ctx.frames.atracks(*_track_request(ctx, state["video"], idx, points, query_t), ctx.tools.lane)
        cached = await run_blocking(_render_tracks, state, ctx, idx, tracks, shown)
        ctx.frames.put_extra(key, cached)
    return cached


def _compute_tracks(ctx: RunContext, video: str, idx: list[int], points: list[list[float]],
                    query_t: int = 0) -> Any:
    """Tracks in the clip's pixels, computed on frames whose short side is at most `track_short_side`;
    `points` lie on frame `idx[query_t]` (both backends track both ways from a mid-stretch query)."""
    from tools.motion import MotionTracks

    tracker = ctx.tools.tracker()
    meta = ctx.frames.meta(video)
    frames = ctx.frames.scaled_frames(video, idx, ctx.tools.track_short_side)
    h, w = frames.shape[1:3]
    queries = None
    if points:  # fractions of the frame, checked and clamped by _track
        queries = np.array([[float(query_t), p[0] * (w - 1), p[1] * (h - 1)] for p in points], dtype=np.float32)
    tracks = run_tool("motion", tracker.track, frames, grid_size=None if queries is not None else 8, queries=queries)
    if not isinstance(tracks, MotionTracks) or tracks.num_frames != len(idx):
        got = f"{tracks.num_frames} frames" if isinstance(tracks, MotionTracks) else type(tracks).__name__
        raise ToolFault("motion", "run", f"the tracker returned {got} for {len(idx)} frames")
    if (w, h) != (meta.width, meta.height):
        tracks = tracks.rescaled(meta.width / w, meta.height / h)
    # the clip's frame numbers: the summary's "motion in frames ..." must name frames of the clip,
    # not positions among the (at most 32) tracked ones
    return dataclasses.replace(tracks, frame_indices=list(idx))


def _render_tracks(state: AgentState, ctx: RunContext, idx: list[int], tracks: Any,
                   shown: list[int]) -> tuple[list[dict], str]:
    """(overlay blocks of the `shown` frames, motion summary text)."""
    from tools.motion import draw_tracks_resized, summarize_tracks
    from tools.video import resize_long_side

    meta = state["meta"]
    h, w = int(meta["height"]), int(meta["width"])
    sw, sh = _shown(ctx, meta)
    try:  # the summary's pixels are those of the frames as the model sees them
        seen = tracks if (sw, sh) == (w, h) else tracks.rescaled(sw / w, sh / h)
        summary = summarize_tracks(seen, frame_size=(sh, sw)).text()
        pos = [idx.index(f) for f in shown]
        overlays = None
        if pos:  # drawn at the size the model sees (drawn at full size, a 1080p overlay shrank to nothing)
            small = [resize_long_side(f, ctx.frames.long_side) for f in ctx.frames.frame_list(state["video"], shown)]
            overlays = draw_tracks_resized(small, seen, pos, (sh, sw))  # `seen` is already at that size
    except Exception as exc:  # tracks of the wrong shape from a custom tracker: a fault, not a crash
        raise ToolFault("motion", "run", f"{type(exc).__name__}: {exc}") from exc
    clip = ctx.frames.meta(state["video"])
    labels = [clip.label(f) + " (motion-track overlay)" for f in shown]
    blocks = ctx.frames.array_blocks(overlays, labels) if overlays is not None else []
    return blocks, summary


async def exchange_blocks(state: AgentState, ctx: RunContext, exchange: ToolExchange) -> list[dict]:
    """The images an exchange returned (rebuilt from references)."""
    frames = list(exchange.get("frames", []))
    if not frames:
        return []
    if exchange.get("overlay"):  # the points _track tracked (converted, clamped, checked), not the raw args
        args = track_motion.model_validate(exchange["args"])
        n = int(state["meta"]["frames"])
        idx = track_frames(n, args.start_frame, args.end_frame)
        if "points" in exchange:
            points = exchange["points"]
        else:  # a record checkpointed before `points` was stored: convert its args as _track did
            points = track_points(ctx, state["meta"], args.points)[0]
        query = exchange.get("query_frame")
        query_t = idx.index(query) if query in idx else query_index(n, args.start_frame, args.end_frame)
        blocks, _ = await track_overlays(state, ctx, idx, points, frames, query_t=query_t)
        return blocks
    return await ctx.frames.ablocks(state["video"], frames, box=exchange.get("box"))


def crop_records(exchanges: list[ToolExchange]) -> list[dict[str, Any]]:
    """Crop records for the step trace."""
    out = []
    for e in exchanges:
        if e.get("name") == "view_crop":
            fallback = e.get("box") is None
            out.append({"frame": (e.get("frames") or [None])[0], "box": e.get("box"), "fallback": fallback,
                        "reason": e.get("text") if fallback else None})
    return out
