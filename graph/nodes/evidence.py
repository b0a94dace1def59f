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
  what was dropped or substituted. So is a view_frames call of more than 16 frames (`graph.schemas.cap_view`):
  it shows the first 16 (it was "invalid arguments", and a plan's view that long was skipped whole). The exchange
  stores the arguments as run, bounded (`call_args`, `graph.nodes.tool_args`), not as the model wrote them.
- track_motion reads up to 32 frames of the requested stretch (the tracker is a tool, not a view);
  it returns a text summary plus overlays of up to 4 tracked frames, which count against the frame
  budget and, on a long clip, against the nearby-extra allowance: an overlay shows the frame's image. They
  did not, so a track over an unsampled stretch showed four frames past the allowance per call, also once it
  was spent, and later stages could cite them and show them again as plain frames. An overlay frame outside
  the allowed set spends the allowance like a viewed one; once it is spent, the overlays go on the
  stretch's frames already allowed (spread over them), or on none when the stretch has none (the summary
  still comes back) (`overlay_frames`).
- Overlays are cached in the frame store under the tracked frames and points; the conversation is rebuilt
  from stored references, recomputing an evicted overlay deterministically. The exchange keeps the points
  as tracked (fractions of the frame, clamped, malformed ones left out) and their frame (`points`,
  `query_frame`): replayed from the raw args, per_mille or pixel points and points off the frame failed
  the tracker (the run ineligible) and a point [x] raised IndexError.
- A track whose points are all malformed (`[[0.5]]`) tracks the grid, as a track without points does, and the
  result text says that none of the points could be read and a grid was tracked instead: the same rule as a crop
  box that cannot be read (the full frame, said so), not "invalid arguments" (those are the schema's). The only
  note said the point was "left out", and the model read the grid's summary as the motion of its own points.
- A crop's image label gives the box as the model wrote it (per_mille or pixels; fractions with "unit"): it
  showed fractions under every convention, which invited the next box in fractions, then read as thousandths
  or pixels.
- Only the arguments' validation (the tool's schema) is answered to the model as "invalid arguments";
  frames outside the clip and bad boxes are trimmed or fall back as above. A box that is not four numbers
  (three numbers, corner pairs, a null) is a bad box too, not a schema error (`graph.schemas.CropBox`): it was
  answered as invalid arguments with no frame shown, and in plan mode it failed the whole plan. Anything the
  tool raises while it runs is its failure: a fault, the run ineligible (graph.nodes.common). A catch-all `ValueError`
  around the tools answered a tracking failure (a ValueError mapping the tracks back to the clip, a bad
  frame-size setting) as the model's invalid arguments, and the run was scored without the evidence.
- A track_motion stretch past the clip's last frame is tracked within the clip, and the result text says so
  (it was clamped without a word).
- The tracking itself (shared track jobs, query frame, sizes, overlays) is `graph.nodes.tracking`.
"""

from __future__ import annotations

import functools
from typing import Any

from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, Field, ValidationError

from graph.context import RunContext
from graph.nodes.tool_args import NAME_CHARS
from graph.nodes.tool_args import call_args as bound_args
from graph.nodes.tracking import query_index, track_frames, track_overlays
from graph.schemas import VIEW_FRAMES, CropBox, TrackArgs
from graph.state import AgentState, ToolExchange
from tools.sampling import ALL_FRAMES_LIMIT, FrameIndex

OVERLAY_FRAMES = 4


class view_frames(BaseModel):  # noqa: N801 - tool names are snake_case for the model
    """View original frames of the clip by index."""

    frames: list[FrameIndex] = Field(min_length=1, max_length=VIEW_FRAMES, description="Frame indices (0-based).")


class view_crop(BaseModel):  # noqa: N801
    """View a zoomed region of one frame. box = [x0, y0, x1, y1] in the coordinates the instructions give."""

    frame: FrameIndex = Field(ge=0, description="Frame index (0-based).")
    box: CropBox = Field(description="[x0, y0, x1, y1] (see the instructions).")


class track_motion(TrackArgs):  # noqa: N801 - the arguments are plan mode's TrackRequest's (graph.schemas)
    """Track points through a stretch of frames; returns a motion summary and track overlays."""


@functools.cache
def _spec(tool: type[BaseModel]) -> dict[str, Any]:
    return convert_to_openai_tool(tool)


def tool_specs(motion: bool) -> list[dict[str, Any]]:
    """OpenAI tool specs bound to the inspect model (converted once per process, then cached)."""
    tools = [view_frames, view_crop, track_motion] if motion else [view_frames, view_crop]
    return [_spec(t) for t in tools]


def access_text(n: int, sample: list[int], extra: int) -> str:
    """The access policy in words (for the prompts)."""
    if n <= ALL_FRAMES_LIMIT:
        return f"any frame 0..{n - 1}"
    return (f"the initial sample {sample} plus at most {extra} extra frames of your choice, track overlays "
            "included (once they are used, a request for another frame is answered with the nearest allowed "
            "frame)")


def used_frames(exchanges: list[ToolExchange]) -> int:
    """Frames returned so far by inspection tools (budget accounting)."""
    return sum(len(e.get("frames", [])) for e in exchanges)


def allowance(state: AgentState, ctx: RunContext, exchanges: list[ToolExchange]) -> tuple[set[int], int] | None:
    """(frames a long clip may show without spending more of its allowance: the sample and the extra frames
    any tool showed so far, overlays included; frames of the allowance left), or None for a clip of at most
    81 frames (any frame)."""
    if int(state["meta"]["frames"]) <= ALL_FRAMES_LIMIT:
        return None
    sample = set(state.get("sample", []))
    extra_used = {f for e in exchanges for f in e.get("frames", [])} - sample
    return sample | extra_used, max(0, ctx.config.nearby_extra - len(extra_used))


def overlay_frames(idx: list[int], wanted: list[int], known: set[int], room: int,
                   limit: int) -> tuple[list[int], list[str]]:
    """The overlay frames of a track over `idx` on a long clip, for the `wanted` ones (spread over the
    stretch), with `known` frames allowed and `room` frames of the `limit` allowance left; plus notes. A
    wanted frame outside `known` spends the allowance; once it is spent, frames of `idx` already in `known`
    (spread over them) stand in, up to as many as were wanted (module docstring)."""
    from tools.video import uniform_subset

    new = [f for f in wanted if f not in known]
    if not new:
        return wanted, []
    added = new[:room]
    notes = [f"overlay frames {added} added from the extra-frame allowance ({room - len(added)} of {limit} "
             "left)"] if added else []
    if len(new) <= room:
        return wanted, notes
    keep = {f for f in wanted if f in known} | set(added)
    spare = [f for f in idx if f in known and f not in keep]
    fill = uniform_subset(spare, len(wanted) - len(keep)) if spare else []
    notes.append(f"overlay frames {new[room:]} are outside the allowed set (extra-frame allowance used); "
                 + (f"overlays on the stretch's allowed frames {fill} instead" if fill
                    else "no other frame of the stretch is allowed"))
    return sorted(keep | set(fill)), notes


def allowed(state: AgentState, ctx: RunContext, exchanges: list[ToolExchange],
            requested: list[int]) -> tuple[list[int], list[str]]:
    """Frames to show for a request under the access policy and budget, plus notes."""
    n = int(state["meta"]["frames"])
    notes: list[str] = []
    valid = [f for f in dict.fromkeys(int(r) for r in requested) if 0 <= f < n]
    if len(valid) < len(set(requested)):
        notes.append(f"frames outside 0..{n - 1} dropped")
    policy = allowance(state, ctx, exchanges)
    added: list[int] = []
    at, left = len(notes), 0
    if policy is not None:
        known, left = policy
        ok = [f for f in valid if f in known]
        other = [f for f in valid if f not in known]
        if other:
            added, rest = other[:left], other[left:]
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
    # only the extra frames the budget let through are shown, and so spent (`allowance` counts shown frames)
    if shown := [f for f in added if f in valid]:
        notes.insert(at, f"frames {shown} added from the extra-frame allowance "
                         f"({left - len(shown)} of {ctx.config.nearby_extra} left)")
    return valid, notes


async def execute(state: AgentState, ctx: RunContext, exchanges: list[ToolExchange], rnd: int, call_id: str,
                  name: str, args: dict[str, Any]) -> ToolExchange:
    """Run one tool call; returns its exchange record (references and text only), with the arguments as run
    (`call_args`): what the model wrote is not stored (`graph.nodes.tool_args`)."""
    tool = _TOOLS.get(name)
    args, cut = call_args(name, args)
    base = ToolExchange(round=rnd, call_id=call_id, name=name, args=args, frames=[], box=None, overlay=False)
    if tool is None or (tool is track_motion and not ctx.config.motion):
        names = [t["function"]["name"] for t in tool_specs(ctx.config.motion)]
        return {**base, "text": _text(f"unknown tool {name[:NAME_CHARS]!r}; available: {names}", [cut] if cut else [])}
    try:  # only the arguments are checked here: what the tool raises is its failure, not the model's
        request = tool.model_validate(args)
    except ValidationError as exc:  # bad arguments are the model's to fix
        return {**base, "text": _text(f"invalid arguments for {name}: {str(exc)[:300]}", [cut] if cut else [])}
    base["args"] = request.model_dump()  # as read: "3" is 3, a box as four floats
    if isinstance(request, view_frames):
        frames, notes = allowed(state, ctx, exchanges, request.frames)
        notes = [cut] + notes if cut else notes
        return {**base, "frames": frames, "text": _text(f"showing frames {frames}", notes)}
    lead = [cut] if cut else []
    if isinstance(request, view_crop):
        return await _crop(state, ctx, exchanges, base, request, lead)
    if isinstance(request, track_motion):
        return await _track(state, ctx, exchanges, base, request, lead)
    raise TypeError(f"no executor for tool {name!r}")  # _TOOLS holds only the three above


_TOOLS: dict[str, type[BaseModel]] = {"view_frames": view_frames, "view_crop": view_crop,
                                      "track_motion": track_motion}


def call_args(name: str, args: object) -> tuple[dict[str, Any], str | None]:
    """A call's arguments as run and the note on what was cut (`graph.nodes.tool_args.call_args`), for the tool
    `name` (its own arguments only) or an unknown one."""
    tool = _TOOLS.get(name)
    return bound_args(name, args, None if tool is None else frozenset(tool.model_fields))


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
                request: view_crop, lead: list[str]) -> ToolExchange:
    from tools.video import crop_key, normalize_crop

    frames, notes = allowed(state, ctx, exchanges, [request.frame])
    notes = lead + notes
    coordinates = ctx.config.coordinates
    written = request.box
    numbers = isinstance(written, list) and len(written) == 4 and all(type(v) is float for v in written)
    if not numbers:  # not four numbers (`graph.schemas.CropBox`): the full frame, with the reason
        crop = normalize_crop(written)
        notes.append(str(crop.reason))  # "invalid crop box [0.1, 0.2, 0.6]: expected 4 numbers ...; using the full frame"
        written = None
    else:
        crop = normalize_crop(tuple(_unit(ctx, state["meta"], written)))
    # checked as the frame store crops it, rounded (crop_frame checks again: a side just over 0.02 that
    # rounding took under it raised ValueError there, the run ineligible, instead of falling back here)
    if not crop.fallback:
        crop = normalize_crop(crop_key(crop.box))
    box = None if crop.fallback else [float(b) for b in crop.box]
    if crop.fallback and written is not None:
        if coordinates != "unit":
            why = f"{crop.reason}, read as {coordinates} {_fmt(written)}"
        elif any(v > 1 for v in written):
            why = (f"{crop.reason}; a model that writes pixels or thousandths needs RAA_COORDINATES / "
                   "AgentConfig.coordinates")
        else:
            why = str(crop.reason)
        notes.append(f"invalid crop box {_fmt(written)} ({why}); showing the full frame")
    head = f"frame {frames[0]} " + ("full frame" if box is None else f"crop {_fmt(written)}") if frames else "no frame shown"
    return {**base, "frames": frames, "box": box, "text": _text(head, notes)}


async def _track(state: AgentState, ctx: RunContext, exchanges: list[ToolExchange], base: ToolExchange,
                 request: track_motion, lead: list[str]) -> ToolExchange:
    from tools.video import uniform_subset

    n = int(state["meta"]["frames"])
    idx = track_frames(n, request.start_frame, request.end_frame)
    query_t = query_index(n, request.start_frame, request.end_frame)
    room = ctx.config.frame_budget - used_frames(exchanges)
    k = max(0, min(OVERLAY_FRAMES, room, len(idx)))
    shown = uniform_subset(idx, k)
    notes = lead + ([] if k >= min(OVERLAY_FRAMES, len(idx)) else [f"frame budget: {k} overlay frames"])
    if max(request.start_frame, request.end_frame) > n - 1:  # tracked within the clip (track_frames)
        notes.insert(len(lead), f"stretch {int(request.start_frame)}..{int(request.end_frame)} clamped to the clip's "
                        f"frames 0..{n - 1}")
    if (policy := allowance(state, ctx, exchanges)) is not None:  # a long clip: overlays are views too
        shown, more = overlay_frames(idx, shown, *policy, ctx.config.nearby_extra)
        notes += more
    points, point_notes = track_points(ctx, state["meta"], request.points)
    summary = (await track_overlays(state, ctx, idx, points, shown, query_t=query_t)).summary
    # the points as tracked and their frame: exchange_blocks replays the overlays from these, not from `args`
    return {**base, "frames": shown, "overlay": True, "points": points, "query_frame": idx[query_t],
            "text": _text(f"tracked frames {idx[0]}..{idx[-1]} ({len(idx)} frames); overlays on {shown}",
                          notes + point_notes) + "\n" + summary}


def track_points(ctx: RunContext, meta: dict[str, Any], raw: list[list[float]]) -> tuple[list[list[float]], list[str]]:
    """(track_motion's points as fractions of the frame, clamped to it, those not [x, y] left out; notes). When
    points were given and none is [x, y], none is kept (the grid is tracked) and the note says so (module docstring)."""
    points, outside, notes = [], [], []
    malformed = [p for p in raw if len(p) != 2]
    if raw and len(malformed) == len(raw):
        return [], [f"none of the {len(raw)} point{'s' if len(raw) > 1 else ''} given could be read "
                    f"({', '.join(_fmt(p) for p in malformed)}: expected [x, y]); tracked a grid instead"]
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
        return (await track_overlays(state, ctx, idx, points, frames, query_t=query_t)).blocks
    box = exchange.get("box")
    # a crop is labelled in the model's own coordinates (per_mille, pixels): fractions there invited the next
    # box in fractions, read as thousandths or pixels (a crop of the top-left corner, or a fallback). The box as
    # validated: the raw args may hold numbers as strings ("100"), which pydantic reads and ":g" does not.
    label = None if box is None or ctx.config.coordinates == "unit" else \
        _fmt(view_crop.model_validate(exchange["args"]).box)
    return await ctx.frames.ablocks(state["video"], frames, box=box, box_label=label)


def crop_records(exchanges: list[ToolExchange]) -> list[dict[str, Any]]:
    """Crop records for the step trace: the view_crop calls that showed a frame (one outside the clip, past the
    frame budget or with arguments the tool refused showed none: its tool summary says why, it is no crop used). A crop
    that fell back to the full frame keeps the box asked for (`requested`, as written), which `raa trace` shows."""
    out = []
    for e in exchanges:
        if e.get("name") == "view_crop" and e.get("frames"):
            fallback = e.get("box") is None
            record = {"frame": e["frames"][0], "box": e.get("box"), "fallback": fallback,
                      "reason": e.get("text") if fallback else None}
            out.append({**record, "requested": (e.get("args") or {}).get("box")} if fallback else record)
    return out
