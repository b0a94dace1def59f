"""inspect and tool_call nodes: the bounded re-inspection loop (paper Sec. 3.2, DESIGN.md §3).

tools mode: the backbone, bound to view_frames / view_crop (/ track_motion when motion is on),
re-examines the uncertain judgments; tool_call executes the calls and the loop returns to inspect
until the model answers without a tool call or `max_tool_rounds` rounds have run. plan mode: one
structured InspectionPlan, executed at once (servers without tool calling).

Decisions where the issue was silent:
- The conversation is rebuilt each round from the stored exchanges (no image bytes in state).
  OpenAI-compatible servers accept only text in tool messages, so each tool message carries the
  result text and one following user message carries that round's images with their labels.
- The opening message has no images: the model asks for what it wants to see.
- A final answer the server cut at the token limit (finish_reason "length") is kept as the inspector's
  notes (it is what the model saw) with a run note saying it was cut (raise RAA_MAX_TOKENS); the backbone
  does not cache it (graph/tool_rounds.py).
- track_motion runs at most `TRACKS_PER_ROUND` (2) times per inspect round in both modes: plan mode's schema
  caps a plan's tracks at 2, and a tools-mode reply may make any number of calls, each a CPU- or GPU-heavy
  tracking job (20 calls in one reply ran 20). A call past the cap is answered "track_motion not run: ..."
  with the reason and no frames; a call answered "invalid arguments" ran nothing and does not count.
- A tools-mode reply runs at most `CALLS_PER_ROUND` (10) calls, the first ones: the later calls are left out of the
  round (not run, not stored, not in the assistant message sent back, so no tool message is owed for them) and the
  round's last answer ends with how many and why (`round_calls`). A reply of 300 calls ran all 300 each round, and
  every later request and checkpoint carried 1,200 exchanges after four rounds: the text grew by about 17K
  characters a round until a request could exceed the server's context and the run ended ineligible. Answering each
  left-out call "not run" would have kept that growth (the answers are as long as the results). The cap counts calls
  the model asked for, as a plan's caps count its entries (8 views and 2 tracks: the same 10).
- A call's arguments are stored and sent back as run, bounded (`graph.nodes.tool_args`), from `round_calls` on:
  a view_frames call of 3,000 frames showed 16 but every later request, reflect's request, the checkpoints and the
  trace carried all 3,000, and a 1 MB string argument the same. Its answer ends with a note of what was cut. An id or
  tool name of more than 64 characters is cut too (an id by giving the call a new one, as below).
- The ids of a round's calls are unique in the conversation (`round_calls`): a call without an id, or repeating an
  id of an earlier call of the reply or of an earlier round (a server numbering calls per reply: "call_0" each
  round), gets "call_<round>_<k>"; each still runs. They were sent back as the server gave them, and an
  OpenAI-compatible server may refuse (400) a conversation that repeats a tool-call id, failing the run.
- plan mode runs each valid entry of the plan: an entry that is not valid (a track request with a frame that
  is not a number or is negative, points not [x, y] pairs, no start_frame; a view with no frames) is kept as
  written by the schema (`graph.schemas.PlanView` / `PlanTrack`, like a crop box, `CropBox`) and answered with
  an exchange "plan track 2 not run: invalid arguments for track_motion: <why>" (no frames; the step's tool
  summaries show it), as tools mode answers such a call; views past 8 and tracks past the cap (by place in the
  list, as the schema's maxItems says) are answered together, one call per part ("plan views 9-300 not run: ...";
  each had its own exchange, 292 for a plan of 300 views, `_past_cap`). Refused
  by the schema, one bad entry failed the whole InspectionPlan: every re-ask failed the same way and the run
  ended ineligible. A view of more than 16 frames shows its first 16 with a note naming the rest, as a tools-mode
  view_frames call does (`graph.schemas.cap_view`); it was skipped whole. With motion evidence off (a preset without it), each track request is answered
  "plan track N not run: motion evidence is off in this preset": they were dropped without a trace. A plan whose
  `views` or `tracks` is not a list (a single object, a string, null) is answered "plan views not run: views is
  not a list (...)" and the other part runs (`graph.schemas.PlanPart`): it failed the whole plan, re-asked the same
  way each time, while one bad entry was already skipped. A
  reversed stretch or frames past the clip's end are tracked within the clip, as in tools mode
  (`graph.nodes.tracking.track_frames`).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, NamedTuple

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from pydantic import ValidationError

from graph.context import RunContext
from graph.nodes.audit import code_missing
from graph.nodes.background import raise_if_failed
from graph.nodes.common import Step, brief, count, dump, human, system
from graph.nodes.contract_of import need_contract
from graph.nodes.evidence import (
    access_text,
    call_args,
    coordinates_text,
    crop_records,
    exchange_blocks,
    execute,
    tool_specs,
)
from graph.nodes.tool_args import NAME_CHARS
from graph.nodes.tool_args import call_args as bound_args
from graph.replies import after_reasoning, cut_at_token_limit
from graph.schemas import (
    CALLS_PER_ROUND,
    PLAN_VIEWS,
    TRACKS_PER_ROUND,
    FrameView,
    InspectionPlan,
    TrackRequest,
    cap_view,
    entry_error,
)
from graph.state import AgentState, ToolExchange

MOTION_OFF = "motion evidence is off in this preset"
"""Why a plan's track request is not run when the preset has no motion evidence."""


def motion_tool_text(cap: int) -> str:
    """The track_motion line of the inspect prompt, with the per-round cap the loop enforces (`tool_call`):
    the model is told this limit as it is told the round limit and the frame budget."""
    return ("- track_motion(start_frame, end_frame, points): point tracks with overlays and a motion summary; "
            f"at most {cap} track_motion calls per round (later ones in a round are not run);")


def _opening(state: AgentState) -> str:
    contract, assessment = need_contract(state), state["assessment"]
    uncertain = [j.requirement_id for j in assessment.judgments
                 if j.status in ("partial", "unverifiable") or j.confidence < 0.7]
    # a requirement without a judgment scores as unverifiable (graph.gate.requirement_statuses): most uncertain
    uncertain += [f"{rid} (no judgment yet)" for rid in code_missing(assessment, contract)]
    return ("Task contract:\n" + dump(contract) + "\n\nCurrent assessment:\n" + dump(assessment)
            + f"\n\nInitially sampled frames: {list(state['sample'])}."
            + f"\nUncertain judgments: {uncertain or 'none flagged; check the key contact and end-state frames'}.")


async def conversation(state: AgentState, ctx: RunContext) -> list[BaseMessage]:
    """System + opening message + every executed round (AI tool calls, tool results, images)."""
    cfg = ctx.config
    meta = state["meta"]
    messages: list[BaseMessage] = [
        system("inspect", n_frames=meta["frames"], fps=f"{float(meta['fps']):g}",
               motion_tool=motion_tool_text(TRACKS_PER_ROUND) if cfg.motion else "",
               access=access_text(int(meta["frames"]), list(state["sample"]), cfg.nearby_extra),
               max_rounds=cfg.max_tool_rounds, max_calls=CALLS_PER_ROUND, frame_budget=cfg.frame_budget,
               coordinates=coordinates_text(ctx, meta)),
        human(_opening(state))]
    exchanges = list(state.get("exchanges", []))
    for rnd in sorted({e["round"] for e in exchanges}):
        batch = [e for e in exchanges if e["round"] == rnd]
        messages.append(AIMessage(content="", tool_calls=[{"id": e["call_id"], "name": e["name"], "args": e["args"],
                                                           "type": "tool_call"} for e in batch]))
        blocks: list[dict] = []
        for e in batch:
            messages.append(ToolMessage(content=e["text"], tool_call_id=e["call_id"]))
            blocks += await exchange_blocks(state, ctx, e)
        if blocks:
            messages.append(human(f"Images returned by the tool calls of round {rnd + 1}:", blocks))
    return messages


async def inspect(state: AgentState, ctx: RunContext, step: Step) -> dict[str, Any]:
    raise_if_failed(state, ctx, step.thread_id)  # background evidence already failed: no model call
    if ctx.config.inspect_mode == "plan":
        return await _plan(state, ctx, step)
    rounds = int(state.get("inspect_rounds", 0))
    messages = await conversation(state, ctx)
    reply = await ctx.backbone.atool_round("inspect", messages, tool_specs(ctx.config.motion), step.usage)
    if reply.tool_calls:
        calls = round_calls(reply.tool_calls, rounds, {e["call_id"] for e in state.get("exchanges", [])})
        left = len(reply.tool_calls) - len(calls)
        step.decision = f"round {rounds + 1}: " + ", ".join(c["name"] for c in calls) + (
            f"; {count(left, 'call')} past the cap of {CALLS_PER_ROUND} left out" if left else "")
        return {"pending_calls": calls, "inspect_rounds": rounds + 1}
    step.decision = f"done after {count(rounds, 'tool round')}"
    update: dict[str, Any] = {"pending_calls": [], "inspect_notes": after_reasoning(reply.text).strip()[:4000]}
    if cut_at_token_limit(reply):
        step.decision += "; answer cut at the token limit"
        update["notes"] = ["inspect: the inspector's final answer was cut at the token limit (finish_reason "
                           "'length'), so its notes are incomplete (raise RAA_MAX_TOKENS)"]
    return update


def round_calls(tool_calls: list[Any], rnd: int, taken: Collection[str] = ()) -> list[dict[str, Any]]:
    """The calls of round `rnd`'s reply to run, as pending calls {"id", "name", "args"}: the first
    `CALLS_PER_ROUND`, the last of them with "left_out", how many later calls are left out (module docstring).
    Their ids are unique in the conversation: a call without an id, or repeating one an earlier call of the reply
    has or one of `taken` (the ids of earlier rounds' calls), gets "call_<round>_<k>" (k its place in the reply;
    suffixed when the reply or `taken` has that id too), as does one longer than `NAME_CHARS`. The conversation
    sent back is rebuilt from these ids, and a server may refuse one that repeats an id (400). Arguments are as they
    will run, bounded, with "cut" noting what was cut (`graph.nodes.evidence.call_args`): pending calls are
    checkpointed."""
    kept = tool_calls[:CALLS_PER_ROUND]
    written = {str(c.get("id")) for c in kept if c.get("id")} | set(taken)
    used: set[str] = set(taken)
    calls: list[dict[str, Any]] = []
    for k, c in enumerate(kept):
        call_id = str(c.get("id") or "")
        if not call_id or call_id in used or len(call_id) > NAME_CHARS:  # a 1 MB id would go back each round
            call_id, n = f"call_{rnd}_{k}", 0
            while call_id in used or call_id in written:
                n += 1
                call_id = f"call_{rnd}_{k}_{n}"
        used.add(call_id)
        name = str(c["name"])[:NAME_CHARS]
        args, cut = call_args(name, c["args"])  # as they will run, bounded: pending calls are checkpointed
        calls.append({"id": call_id, "name": name, "args": args, **({"cut": cut} if cut else {})})
    if left := len(tool_calls) - len(kept):
        calls[-1]["left_out"] = left
    return calls


async def tool_call(state: AgentState, ctx: RunContext, step: Step) -> dict[str, Any]:
    rnd = int(state.get("inspect_rounds", 1)) - 1
    pending = list(state.get("pending_calls", []))
    calls = [_Call(c["id"], c["name"], c["args"], c["name"], note=_notes(c.get("cut"), _left_out(c.get("left_out", 0))))
             for c in pending]
    new = await _run_calls(state, ctx, list(state.get("exchanges", [])), rnd, calls, step)
    left = sum(int(c.get("left_out", 0)) for c in pending)
    step.decision = f"executed {count(len(new), 'tool call')}" + (
        f", {left} left out (at most {CALLS_PER_ROUND} per round)" if left else "")
    step.decision += " (cap reached)" if rnd + 1 >= ctx.config.max_tool_rounds else ""
    return {"exchanges": new, "pending_calls": []}


def _notes(*notes: str | None) -> str | None:
    """The notes given, joined, or None when there are none."""
    return "; ".join(n for n in notes if n) or None


def _left_out(n: int) -> str | None:
    """The note on a round's last answer when `n` later calls of the reply were left out (`round_calls`)."""
    if not n:
        return None
    return (f"{count(n, 'more tool call')} of this reply were not run and are left out of this conversation: "
            f"at most {CALLS_PER_ROUND} tool calls per round; ask again in a later round for what you still need")


class _Call(NamedTuple):
    """One tool call of a round: a tools-mode call, or a plan entry with `skip` set when it is not to be run."""

    call_id: str
    name: str
    args: Any
    label: str
    """How a "not run" answer names it: the tool (tools mode) or the entry ("plan track 2")."""
    skip: str | None = None
    """Why it is not run (plan mode: an invalid entry, a view past the cap), or None."""
    note: str | None = None
    """A note added to its answer (plan mode: the frames a crop view past `VIEW_FRAMES` dropped; tools mode: the
    calls of the reply left out past `CALLS_PER_ROUND`), or None."""
    entries: int = 1
    """Plan entries it answers: one, or all those past a part's cap (`_past_cap`)."""


def _track_cap() -> str:
    """Why a track request past `TRACKS_PER_ROUND` is not run."""
    return f"at most {TRACKS_PER_ROUND} track_motion runs per round (a tracking job is heavy)"


async def _run_calls(state: AgentState, ctx: RunContext, exchanges: list[ToolExchange], rnd: int,
                     calls: list[_Call], step: Step) -> list[ToolExchange]:
    """Execute one round's calls in order; a call with `skip`, or a track_motion call past `TRACKS_PER_ROUND`
    runs (module docstring), is answered "<label> not run: <why>" without running. `step` records each call as it
    ends, so a call that faults leaves those before it in the trace (they were recorded only after the round)."""
    new: list[ToolExchange] = []
    tracks = 0
    for call in calls:
        skip = call.skip
        if skip is None and call.name == "track_motion" and tracks >= TRACKS_PER_ROUND:
            skip = _track_cap()
        if skip is not None:  # never run: stored as written (no key left out as the tool's), bounded
            args = bound_args(call.name, call.args, None)[0]
            ex = ToolExchange(round=rnd, call_id=call.call_id, name=call.name, args=args, frames=[],
                              box=None, overlay=False, text=f"{call.label} not run: {skip}")
        else:
            ex = await execute(state, ctx, exchanges + new, rnd, call.call_id, call.name, call.args)
            tracks += bool(ex.get("overlay"))  # it ran (an "invalid arguments" answer ran nothing)
        if call.note is not None:
            ex = {**ex, "text": f"{ex['text']} ({call.note})"}
        new.append(ex)
        _record(step, new)
    return new


async def _plan(state: AgentState, ctx: RunContext, step: Step) -> dict[str, Any]:
    meta = state["meta"]
    cfg = ctx.config
    messages = [system("plan", n_frames=meta["frames"], frame_budget=cfg.frame_budget, max_views=PLAN_VIEWS,
                       access=access_text(int(meta["frames"]), list(state["sample"]), cfg.nearby_extra),
                       motion_hint=f" and up to {TRACKS_PER_ROUND} motion-track requests" if cfg.motion else "",
                       coordinates=coordinates_text(ctx, meta)),
                human(_opening(state))]
    plan = await ctx.backbone.astructured("plan", InspectionPlan, messages, step.usage)
    calls = plan_calls(plan, cfg.motion)
    new = await _run_calls(state, ctx, [], 0, calls, step)
    views = len({c.label for c in calls if c.name != "track_motion" and c.skip is None})
    tracks = sum(1 for e in new if e.get("overlay"))
    step.decision = f"plan: {count(views, 'view')}, {count(tracks, 'track')} executed" + _not_run(calls)
    return {"plan": plan, "exchanges": new, "pending_calls": [], "inspect_rounds": 1}


def _not_run(calls: list[_Call]) -> str:
    """The plan step's note on the entries not run: how many, and why in short (a plan reaches `_run_calls` with
    at most `TRACKS_PER_ROUND` tracks, so `skip` says every entry not run)."""
    skipped = [c for c in calls if c.skip is not None]
    if not skipped:
        return ""
    total = sum(c.entries for c in skipped)
    off = sum(c.entries for c in skipped if c.skip == MOTION_OFF)
    why = [w for w, n in (("invalid or past the caps", total - off), ("motion off", off)) if n]
    return f"; {total} not run ({', '.join(why)})"


def plan_calls(plan: InspectionPlan, motion: bool) -> list[_Call]:
    """The plan's tool calls in order (views, then tracks), invalid entries and every track when motion evidence is
    off marked to be answered, not run; the entries of a part past its cap (`PLAN_VIEWS`, `TRACKS_PER_ROUND`)
    answered together by one call (module docstring)."""
    calls: list[_Call] = []
    views = _part(calls, plan.views, "views", "view_frames", None)
    for k, written in enumerate(views[:PLAN_VIEWS], 1):
        label, at = f"plan view {k}", f"plan_{len(calls)}"
        view, note = _capped(written)
        if not isinstance(view, FrameView):  # kept as written by the schema (graph.schemas.PlanView)
            calls.append(_Call(at, "view_frames", view, label, f"invalid view: {entry_error(FrameView, view)}"))
        elif view.box is None:  # frames as written: view_frames cuts a long view with the note, as in tools mode
            frames = written.get("frames") if isinstance(written, dict) else view.frames
            calls.append(_Call(at, "view_frames", {"frames": frames}, label))
        else:
            calls += [_Call(f"plan_{len(calls) + i}", "view_crop", {"frame": f, "box": view.box}, label,
                            note=note if i == 0 else None)
                      for i, f in enumerate(view.frames)]
    _past_cap(calls, views, PLAN_VIEWS, "view", "view_frames", f"a plan runs at most {PLAN_VIEWS} views")
    off = None if motion else MOTION_OFF
    tracks = _part(calls, plan.tracks, "tracks", "track_motion", off)
    for k, track in enumerate(tracks[:TRACKS_PER_ROUND], 1):
        label, at = f"plan track {k}", f"plan_{len(calls)}"
        if not motion:  # noted like any entry not run: dropped silently, the trace did not show it
            calls.append(_Call(at, "track_motion", track, label, MOTION_OFF))
        elif isinstance(track, TrackRequest):
            calls.append(_Call(at, "track_motion", track.model_dump(), label))
        else:  # as tools mode answers such a call
            why = f"invalid arguments for track_motion: {entry_error(TrackRequest, track)}"
            calls.append(_Call(at, "track_motion", track, label, why))
    _past_cap(calls, tracks, TRACKS_PER_ROUND, "track", "track_motion", off or _track_cap())
    return calls


def _past_cap(calls: list[_Call], entries: list[object], cap: int, noun: str, tool: str, why: str) -> None:
    """One call appended to `calls` answering every entry of a plan part past its `cap`: "plan view 9 not run: ..."
    (with the entry as written), or "plan views 9-300 not run: ..." (with their number). Each was answered on its
    own: a plan of 300 views gave 292 exchanges, each in the checkpoints and in reflect's request."""
    rest = entries[cap:]
    if not rest:
        return
    label = f"plan {noun} {cap + 1}" if len(rest) == 1 else f"plan {noun}s {cap + 1}-{len(entries)}"
    args = rest[0] if len(rest) == 1 else {"entries": len(rest)}
    calls.append(_Call(f"plan_{len(calls)}", tool, args, label, why, entries=len(rest)))


def _part(calls: list[_Call], part: object, name: str, tool: str, off: str | None) -> list[object]:
    """The entries of a plan's `views` or `tracks` (`name`); when it is not a list (kept as written,
    `graph.schemas.PlanPart`), none, and one call answering "plan <name> not run: <why>" appended to `calls`
    (`off`: the reason nothing of it would run anyway, motion evidence off)."""
    if isinstance(part, list):
        return part
    why = off or f"{name} is not a list ({_kind(part)}): write a list of {name[:-1]} objects"
    calls.append(_Call(f"plan_{len(calls)}", tool, part, f"plan {name}", why))
    return []


def _kind(value: object) -> str:
    """What a value as written is, in JSON's words."""
    return "null" if value is None else {dict: "an object", str: "a string", bool: "a boolean"}.get(
        type(value), "a number" if isinstance(value, int | float) else type(value).__name__)


def _capped(view: object) -> tuple[object, str | None]:
    """A view kept as written that is valid once cut to its first `VIEW_FRAMES` frames: that FrameView and the
    note on the frames dropped (`graph.schemas.cap_view`); any other view as it is, without a note."""
    if isinstance(view, FrameView) or not isinstance(view, dict):
        return view, None
    frames, note = cap_view(view.get("frames"))
    if note is None:
        return view, None
    try:
        return FrameView.model_validate({**view, "frames": frames}), note
    except ValidationError:
        return view, None


def _record(step: Step, new: list[ToolExchange]) -> None:
    step.frames = [f for e in new for f in e.get("frames", [])]
    step.crops = crop_records(new)
    step.tool_summaries = [f"{e['name']}({e['args']}): {brief(e['text'])}" for e in new]

