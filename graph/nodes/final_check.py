"""final_check node: decides failure established (F) and essential unverifiable (U) (paper Sec. 3.2).

Runs with the failure gate on. When every essential requirement is met or partial, F = U = False
by code with no model call. A contract that marks no requirement essential has every requirement
count as essential here, as in T (`graph.gate.essential_ids`): otherwise such a contract would pass the
gate whatever the clip shows. Otherwise a final visual check looks at the evidence frames of the
essential gaps, the end of the clip (the uniform sample's last 3 frames, always shown, however many
frames the gaps cite) and the uniform sample (at most 16 frames).
"""

from __future__ import annotations

from typing import Any

from graph.context import RunContext
from graph.gate import essential_gaps
from graph.nodes.common import Step, dump, human, pick_frames, system
from graph.schemas import FinalCheck
from graph.state import AgentState

CHECK_FRAMES = 16


async def final_check(state: AgentState, ctx: RunContext, step: Step) -> dict[str, Any]:
    contract, assessment = state["contract"], state["assessment"]
    gaps = essential_gaps(assessment, contract)
    if not gaps:
        step.decision = "no essential gap: F=0, U=0 (no model call)"
        return {"final_check": FinalCheck(failure_established=False, essential_unverifiable=False,
                                          rationale="every essential requirement is met or partial")}
    sample = list(state["sample"])
    evidence = [f for i in gaps if (j := assessment.judgment(i)) is not None for f in j.evidence_frames]
    frames = pick_frames(evidence, sample, min(CHECK_FRAMES, ctx.config.max_images_per_call), keep=sample[-3:])
    blocks = await ctx.frames.ablocks(state["video"], frames)
    text = ("Task contract:\n" + dump(contract) + "\n\nAssessment:\n" + dump(assessment)
            + f"\n\nEssential requirements not met or unverifiable: {gaps}"
            + ("" if any(r.essential for r in contract.requirements)
               else " (the contract marks no requirement essential, so every requirement counts as essential)")
            + f". Frames shown below: {frames}.")
    out = await ctx.backbone.astructured("final_check", FinalCheck, [system("final_check"), human(text, blocks)],
                                         step.usage)
    step.frames = frames
    step.decision = (f"gaps {gaps}: failure_established={out.failure_established}, "
                     f"essential_unverifiable={out.essential_unverifiable}")
    return {"final_check": out}
