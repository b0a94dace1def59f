"""final_check node: decides failure established (F) and essential unverifiable (U) (paper Sec. 3.2).

Runs with the failure gate on. When every essential requirement is met or partial, F = U = False
by code with no model call. A contract that marks no requirement essential has every requirement
count as essential here, as in T (`graph.gate.essential_ids`): otherwise such a contract would pass the
gate whatever the clip shows. Otherwise a final visual check looks at the evidence frames of the
essential gaps, the end of the clip (the uniform sample's last 3 frames, always shown, however many
frames the gaps cite) and the uniform sample (at most 16 frames).

Decision where the issue was silent: the check's ``evidence_frames`` outside the clip (0..frames-1) are
dropped with a note in the run's notes, as `graph.nodes.common.tidy_assessment` does for judgments. They
were kept as given: the state (and so the trace) and the HTML report's final-check row showed frames the
clip does not have, as links to frame anchors that do not exist (the report decodes only in-clip frames, so
nothing crashed). The gate reads only the two flags, so the reward is unchanged. Frames inside the clip that
the model was never shown in the run (`graph.nodes.common.shown_frames`, plus this check's own frames) are
dropped with a note the same way, as `tidy_assessment` drops them from judgments.

An essential requirement the final assessment leaves unverifiable, or never judged (`graph.gate.unverified_essentials`),
sets U by code, with a note when the check wrote essential_unverifiable false: the check decides F, but cannot
verify a requirement without a judgment backing it. A check denying U (a hostile or careless reply) let a clip
whose essentials were never judged (every judgment naming an id the contract lacks) score 0.30 on P and V alone.
"""

from __future__ import annotations

from typing import Any

from graph.context import RunContext
from graph.gate import essential_gaps, unverified_essentials
from graph.nodes.common import (
    Step,
    dump,
    frames_total,
    human,
    pick_frames,
    shown_frames,
    split_in_clip,
    split_shown,
    system,
)
from graph.nodes.contract_of import need_contract
from graph.schemas import FinalCheck
from graph.state import AgentState

CHECK_FRAMES = 16


async def final_check(state: AgentState, ctx: RunContext, step: Step) -> dict[str, Any]:
    contract, assessment = need_contract(state), state["assessment"]
    gaps = essential_gaps(assessment, contract)
    if not gaps:
        step.decision = "no essential gap: F=0, U=0 (no model call)"
        return {"final_check": FinalCheck(failure_established=False, essential_unverifiable=False,
                                          rationale="every essential requirement is met or partial")}
    sample = list(state["sample"])
    evidence = [f for i in gaps if (j := assessment.judgment(i)) is not None for f in j.evidence_frames]
    frames = pick_frames(evidence, sample, min(CHECK_FRAMES, ctx.config.max_images_per_call), keep=sample[-3:])
    blocks = await ctx.frames.ablocks(state["video"], frames)
    step.frames = frames  # before the call: a faulted request's frames are traced too
    text = ("Task contract:\n" + dump(contract) + "\n\nAssessment:\n" + dump(assessment)
            + f"\n\nEssential requirements not met or unverifiable: {gaps}"
            + ("" if any(r.essential for r in contract.requirements)
               else " (the contract marks no requirement essential, so every requirement counts as essential)")
            + f". Frames shown below: {frames}.")
    out = await ctx.backbone.astructured("final_check", FinalCheck, [system("final_check"), human(text, blocks)],
                                         step.usage)
    n_frames = frames_total(state)
    inside, outside = split_in_clip(out.evidence_frames, n_frames)
    kept, unseen = split_shown(inside, shown_frames(state) | set(frames))
    notes = [f"final_check: cited frames {outside} outside the clip (0..{n_frames - 1}); dropped"] if outside else []
    notes += [f"final_check: cited frames {unseen} the model was not shown; dropped"] if unseen else []
    out = out.model_copy(update={"evidence_frames": kept}) if outside or unseen else out
    if (unverified := unverified_essentials(assessment, contract)) and not out.essential_unverifiable:
        notes.append(f"final_check: essential requirement(s) {unverified} unverifiable or never judged in the "
                     "assessment; essential_unverifiable set to true (the check wrote false)")
        out = out.model_copy(update={"essential_unverifiable": True})
    step.decision = (f"gaps {gaps}: failure_established={out.failure_established}, "
                     f"essential_unverifiable={out.essential_unverifiable}"
                     + (f"; {len(outside)} out-of-clip evidence frame(s) dropped" if outside else "")
                     + (f"; {len(unseen)} unseen evidence frame(s) dropped" if unseen else ""))
    return {"final_check": out, **({"notes": notes} if notes else {})}
