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
  does not cache it (graph/backbone.py).
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from graph.context import RunContext
from graph.nodes.audit import code_missing
from graph.nodes.background import raise_if_failed
from graph.nodes.common import Step, brief, count, dump, human, system
from graph.nodes.evidence import (
    access_text,
    coordinates_text,
    crop_records,
    exchange_blocks,
    execute,
    tool_specs,
)
from graph.replies import after_reasoning, cut_at_token_limit
from graph.schemas import InspectionPlan
from graph.state import AgentState, ToolExchange

MOTION_TOOL = "- track_motion(start_frame, end_frame, points): point tracks with overlays and a motion summary;"


def _opening(state: AgentState) -> str:
    assessment = state["assessment"]
    uncertain = [j.requirement_id for j in assessment.judgments
                 if j.status in ("partial", "unverifiable") or j.confidence < 0.7]
    # a requirement without a judgment scores as unverifiable (graph.gate.requirement_statuses): most uncertain
    uncertain += [f"{rid} (no judgment yet)" for rid in code_missing(assessment, state["contract"])]
    return ("Task contract:\n" + dump(state["contract"]) + "\n\nCurrent assessment:\n" + dump(assessment)
            + f"\n\nInitially sampled frames: {list(state['sample'])}."
            + f"\nUncertain judgments: {uncertain or 'none flagged; check the key contact and end-state frames'}.")


async def conversation(state: AgentState, ctx: RunContext) -> list[BaseMessage]:
    """System + opening message + every executed round (AI tool calls, tool results, images)."""
    cfg = ctx.config
    meta = state["meta"]
    messages: list[BaseMessage] = [
        system("inspect", n_frames=meta["frames"], fps=f"{float(meta['fps']):g}",
               motion_tool=MOTION_TOOL if cfg.motion else "",
               access=access_text(int(meta["frames"]), list(state["sample"]), cfg.nearby_extra),
               max_rounds=cfg.max_tool_rounds, frame_budget=cfg.frame_budget,
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
    calls = [{"id": c.get("id") or f"call_{rounds}_{k}", "name": c["name"], "args": dict(c["args"])}
             for k, c in enumerate(reply.tool_calls)]
    if calls:
        step.decision = f"round {rounds + 1}: " + ", ".join(c["name"] for c in calls)
        return {"pending_calls": calls, "inspect_rounds": rounds + 1}
    step.decision = f"done after {count(rounds, 'tool round')}"
    update: dict[str, Any] = {"pending_calls": [], "inspect_notes": after_reasoning(reply.text).strip()[:4000]}
    if cut_at_token_limit(reply):
        step.decision += "; answer cut at the token limit"
        update["notes"] = ["inspect: the inspector's final answer was cut at the token limit (finish_reason "
                           "'length'), so its notes are incomplete (raise RAA_MAX_TOKENS)"]
    return update


async def tool_call(state: AgentState, ctx: RunContext, step: Step) -> dict[str, Any]:
    rnd = int(state.get("inspect_rounds", 1)) - 1
    exchanges: list[ToolExchange] = list(state.get("exchanges", []))
    new: list[ToolExchange] = []
    for call in state.get("pending_calls", []):
        ex = await execute(state, ctx, exchanges + new, rnd, call["id"], call["name"], call["args"])
        new.append(ex)
    _record(step, new)
    cap = " (cap reached)" if rnd + 1 >= ctx.config.max_tool_rounds else ""
    step.decision = f"executed {count(len(new), 'tool call')}{cap}"
    return {"exchanges": new, "pending_calls": []}


async def _plan(state: AgentState, ctx: RunContext, step: Step) -> dict[str, Any]:
    meta = state["meta"]
    cfg = ctx.config
    messages = [system("plan", n_frames=meta["frames"], frame_budget=cfg.frame_budget,
                       access=access_text(int(meta["frames"]), list(state["sample"]), cfg.nearby_extra),
                       motion_hint=" and up to 2 motion-track requests" if cfg.motion else "",
                       coordinates=coordinates_text(ctx, meta)),
                human(_opening(state))]
    plan = await ctx.backbone.astructured("plan", InspectionPlan, messages, step.usage)
    calls: list[tuple[str, dict[str, Any]]] = []
    for view in plan.views:
        if view.box is None:
            calls.append(("view_frames", {"frames": view.frames}))
        else:
            calls += [("view_crop", {"frame": f, "box": view.box}) for f in view.frames]
    if cfg.motion:
        calls += [("track_motion", t.model_dump()) for t in plan.tracks]
    new: list[ToolExchange] = []
    for k, (name, args) in enumerate(calls):
        new.append(await execute(state, ctx, new, 0, f"plan_{k}", name, args))
    _record(step, new)
    step.decision = f"plan: {count(len(plan.views), 'view')}, {count(len(plan.tracks) if cfg.motion else 0, 'track')} executed"
    return {"plan": plan, "exchanges": new, "pending_calls": [], "inspect_rounds": 1}


def _record(step: Step, new: list[ToolExchange]) -> None:
    step.frames = [f for e in new for f in e.get("frames", [])]
    step.crops = crop_records(new)
    step.tool_summaries = [f"{e['name']}({e['args']}): {brief(e['text'])}" for e in new]

