"""audit and repair nodes: scope audit with image-backed repair, at most 3 rounds (paper Sec. 3.2).

audit asks the backbone for missing requirements, invented conditions and contradictions, and adds
by code every contract requirement that has no judgment. repair always re-looks at frames: its
message carries the evidence frames of the requirements involved (topped up from the uniform
sample). A repaired judgment may change status only when it cites at least one frame shown in that
repair message; otherwise the previous judgment is kept and a note says so — a text-only suggestion
never flips a visual judgment (`graph.nodes.revision.guard_judgments`, mode "changes"; so is a met or
partial restated citing no frame). A judgment the repair adds for a requirement that had none needs a
shown frame too, or it is added as unverifiable. A judgment the repair leaves out is kept as it was
(with a note): dropping it would turn it unverifiable without a look. The rubric levels (P, V) are not
the audit's concern and stay as they were (`graph.nodes.revision.guard_levels`).

Decision where the issue was silent: the audit itself is text-only (contract, assessment,
observation); the images go to the repair that acts on it.
Decision: the missing requirement ids the audit names are read as `tidy_assessment` reads judgments: "r2"
is R2 (the repair then shows R2's frames, not every requirement's), and an id the frozen contract does not
hold is dropped with a note in the run's notes, since no repair can add a requirement: kept, it left every
round unclean until the 3 repair rounds were spent. The note is added once per id per run (a later round naming
the same id again leaves it out; its step's decision still counts it), not once per round; so is each of a
repair's notes (`graph.nodes.common.unnoted`).
"""

from __future__ import annotations

import re
from typing import Any

from graph.context import RunContext
from graph.nodes.assess import summarize
from graph.nodes.common import (
    Step,
    contract_id,
    dump,
    frames_total,
    human,
    pick_frames,
    shown_frames,
    system,
    unnoted,
)
from graph.nodes.contract_of import need_contract
from graph.nodes.revision import revise
from graph.schemas import Assessment, AuditReport, TaskContract
from graph.state import AgentState

REPAIR_FRAMES = 16


def code_missing(assessment: Assessment, contract: TaskContract) -> list[str]:
    """Contract requirement ids without any judgment."""
    return [r.id for r in contract.requirements if assessment.judgment(r.id) is None]


async def audit(state: AgentState, ctx: RunContext, step: Step) -> dict[str, Any]:
    contract, assessment = need_contract(state), state["assessment"]
    text = "Task contract:\n" + dump(contract) + "\n\nAssessment:\n" + dump(assessment)
    if state.get("observation") is not None:
        text += "\n\nTask-blind observation:\n" + dump(state["observation"])
    step.audit_round = rounds = int(state.get("repair_rounds", 0))  # before the call: a faulted round is traced too
    report = await ctx.backbone.astructured("audit", AuditReport, [system("audit"), human(text)], step.usage,
                                            params={"round": rounds})
    named = [(rid, contract_id(rid, contract)) for rid in report.missing_requirements]
    unknown = list(dict.fromkeys(rid for rid, cid in named if cid is None))
    notes = unnoted(state, [f"audit: missing requirement {rid!r} is not in the contract "  # once per id per run
                            f"({', '.join(r.id for r in contract.requirements)}); dropped" for rid in unknown])
    missing = list(dict.fromkeys([cid for _, cid in named if cid is not None] + code_missing(assessment, contract)))
    report = AuditReport(missing_requirements=missing[:16], invented_conditions=report.invented_conditions,
                         contradictions=report.contradictions)
    issues = (f"missing {report.missing_requirements}, invented {len(report.invented_conditions)}, "
              f"contradictions {len(report.contradictions)}")
    step.decision = ("clean" if report.clean else f"issues: {issues}") + \
        (f"; {len(unknown)} unknown id(s) dropped" if unknown else "")
    if not report.clean and rounds >= ctx.config.max_repair_rounds:  # no repair follows: the result says so
        notes.append(f"audit: issues remain after {rounds} repair round(s) ({issues}); the assessment stands as is")
    return {"audits": [report], **({"notes": notes} if notes else {})}


def involved_ids(report: AuditReport, contract: TaskContract) -> list[str]:
    """Requirement ids named by the audit (missing ids plus ids mentioned in the issue texts).

    An issue text names an id as `contract_id` reads one: up to case and surrounding spaces unless another contract
    id has the same spelling, and standing alone (no letter, digit or underscore next to it, so R1 is not found in
    R10, and ids such as "(a)" are found). The texts were searched case-sensitively and with word boundaries: "r3"
    did not name R3 while the missing "r3" did, and "(a)" was never found, so the repair left out the frames of
    the requirement a finding was about and undid its image-backed fix of it as citing no frame shown."""
    ids = [r.id for r in contract.requirements]
    keys = [i.strip().casefold() for i in ids]
    named = set(report.missing_requirements)
    for line in report.invented_conditions + report.contradictions:
        for i, key in zip(ids, keys, strict=True):
            flags = re.IGNORECASE if keys.count(key) == 1 else 0
            if re.search(rf"(?<!\w){re.escape(i.strip() if flags else i)}(?!\w)", line, flags):
                named.add(i)
    return [i for i in ids if i in named] or ids


async def repair(state: AgentState, ctx: RunContext, step: Step) -> dict[str, Any]:
    contract, assessment = need_contract(state), state["assessment"]
    report = state["audits"][-1]
    step.audit_round = rounds = int(state.get("repair_rounds", 0))  # before the call: a faulted round is traced too
    ids = involved_ids(report, contract)
    evidence = [f for i in ids if (j := assessment.judgment(i)) is not None for f in j.evidence_frames]
    frames = pick_frames(evidence, list(state["sample"]), min(REPAIR_FRAMES, ctx.config.max_images_per_call))
    blocks = await ctx.frames.ablocks(state["video"], frames)
    step.frames = frames  # before the call: a faulted request's frames are traced too
    text = ("Task contract:\n" + dump(contract) + "\n\nAssessment to repair:\n" + dump(assessment)
            + "\n\nAudit findings (suggestions, not evidence):\n" + dump(report)
            + f"\n\nRequirements involved: {ids}. Frames shown below: {frames}. Return the full repaired assessment.")
    out = await ctx.backbone.astructured("repair", Assessment, [system("repair"), human(text, blocks)], step.usage,
                                         params={"round": rounds})
    out, fixes, guarded, omitted = revise(assessment, out, contract, frames_total(state),
                                          shown_frames(state) | set(frames), set(frames), "repair", "changes")
    notes = unnoted(state, fixes + guarded + omitted)  # a later round doing the same adds no copy
    kept = len(guarded) + len(omitted)
    step.decision = f"round {rounds + 1}: " + summarize(out) + (f"; {kept} unsupported change(s) kept" if kept else "") \
        + (f"; {len(fixes)} judgment fix(es) noted" if fixes else "")
    return {"assessment": out, "assessments": [out], "repair_rounds": rounds + 1, "notes": notes}
