"""assess node: requirement-level judgments with frame references plus rubric levels (paper Sec. 3.2).

Inputs: the uniform frame sample, the frozen contract and, when task-blind observation is on, the
observation written without the instruction.

With motion evidence on (and `AgentConfig.motion_prefetch="grid"`), assess starts the speculative
grid track before its model call: the inspect loop (or reflect) that may use it comes next, and
the CPU is otherwise idle while the model answers. Started here rather than right after decoding,
it never competes with the images observe needs first. Before its model call, assess stops the run
when background evidence (surprise, extra tools) has already failed (graph.nodes.background).
"""

from __future__ import annotations

from typing import Any

from graph.context import RunContext
from graph.gate import score_mapping
from graph.nodes.background import hurry_evidence, raise_if_failed
from graph.nodes.common import Step, dump, frames_total, human, system, tidy_assessment
from graph.nodes.contract_of import need_contract
from graph.nodes.tracking import prefetch_tracks
from graph.schemas import Assessment
from graph.state import AgentState


def summarize(assessment: Assessment) -> str:
    """One line: status per requirement and the rubric levels."""
    statuses = ", ".join(f"{j.requirement_id}={j.status}" for j in assessment.judgments) or "no judgments"
    return f"{statuses}; physical {assessment.physical_level}/5, visual {assessment.visual_level}/5"


async def assess(state: AgentState, ctx: RunContext, step: Step) -> dict[str, Any]:
    sample = list(state["sample"])
    contract = need_contract(state)
    prefetch_tracks(ctx, state["video"], frames_total(state), sample)
    blocks = await ctx.frames.ablocks(state["video"], sample)
    text = "Task contract:\n" + dump(contract)
    observation = state.get("observation")
    if observation is not None:
        text += "\n\nTask-blind observation written before the task was known:\n" + dump(observation)
    text += f"\n\n{len(sample)} frames of the clip follow, in temporal order."
    messages = [system("assess", n_frames=len(sample)), human(text, blocks)]
    raise_if_failed(state, ctx, step.thread_id)  # background evidence already failed: no model call
    hurry_evidence(state, ctx, step.thread_id)  # queued at "later" by quality: needed by reflect (graph.nodes.surprise)
    step.frames = sample  # before the call: a faulted request's frames are traced too
    out = await ctx.backbone.astructured("assess", Assessment, messages, step.usage)
    out, notes = tidy_assessment(out, contract, frames_total(state), sample, "assess")
    t, p, v = score_mapping(out, contract)
    step.decision = f"{summarize(out)} (T={t:.2f}, P={p:.2f}, V={v:.2f})" + (
        f"; {len(notes)} judgment fix(es) noted" if notes else "")
    update: dict[str, Any] = {"assessment": out, "assessments": [out]}
    if notes:
        update["notes"] = notes
    return update
