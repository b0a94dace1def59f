"""Revising an assessment (reflect, repair): which of a revision's judgments stand, and the ones it leaves out.

A revision's reply is tidied like assess's (`graph.nodes.common.tidy_refs`), then guarded against the assessment it
revises (`guard_judgments`), then scored (`graph.nodes.common.score_uncited`), and the judgments it left out are
carried over (`keep_omitted`); `revise` runs the four. The guard reads the status the model wrote, before
`score_uncited` turns an uncited met into unverifiable: it read that unverifiable as the model's change, so repair
noted "R2 met scored as unverifiable ..." and then "R2 kept met (change to unverifiable cited no frame shown)",
a change the model never made, and reflect, which had no guard, lost an image-backed met whenever it restated it
citing only frames it was not shown.

Guard modes (`Guard`), decided per stage:
- "changes" (repair): every status change needs a frame shown in the repair's own message (paper Sec. 3.2: the
  audit's findings are text, and text alone does not overturn what the images showed).
- "credit" (reflect): only credit (met, partial) needs a frame the model was shown. Reflect revises from the
  inspection evidence; its own move to not_met or unverifiable stands without a citation (an occluded clip leaves
  nothing to cite, and keeping the earlier met there would pay for what inspection could not confirm).
In both, a met or partial judgment left citing no frame keeps the earlier judgment when there is one (restated or
changed: the earlier one is what the images backed) and is added as unverifiable when there is none. Except, in
"credit" mode, a change that lowers credit (met -> partial, `lowered`): it stands, on the earlier judgment's evidence
frames. Restoring the earlier met paid full credit for a requirement the revision called partial, while the same
revision's uncited move to not_met stood (more credit for the milder downgrade).

The rubric levels (P, V) cite no frames; `guard_levels` keeps the earlier level and its rationale:
- "changes" (repair): whatever the repair returned (the audit is about scope, so a repair that re-rates physical
  plausibility or visual quality acts on no finding);
- "credit" (reflect): only a raised level. A level rates the whole clip, and reflect's evidence (the frames
  inspected for uncertain judgments, surprise windows, extra tools' claims) covers part of it: it can show a
  problem the uniform sample missed, not that the clip has none. A lowered level stands, as a move to not_met does.
  A reflect returning 5/5 over 2/2, citing nothing (or an extra tool's "physics looks fine"), raised R 0.48 -> 1.0.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

from graph.gate import STATUS_WEIGHT
from graph.nodes.common import CREDITED, score_uncited, split_shown, tidy_refs
from graph.schemas import Assessment, RequirementJudgment, TaskContract

Guard = Literal["changes", "credit"]


def unbacked(new: RequirementJudgment, old_status: str, backed: bool, guard: Guard) -> bool:
    """Whether `new` (its cited frames shown or not: `backed`) may not replace a judgment of `old_status` (module
    docstring): an unbacked status change ("changes"), or credit citing no frame shown ("credit"), or, in either
    mode, credit citing no frame at all (`score_uncited` would score it unverifiable)."""
    if backed:
        return False
    if guard == "changes" and new.status != old_status:
        return True
    return new.status in CREDITED and (guard == "credit" or not new.evidence_frames)


def lowered(new: RequirementJudgment, old: RequirementJudgment, guard: Guard) -> bool:
    """Whether an unbacked `new` lowers `old`'s credit in "credit" mode (met -> partial): the model's own verdict on
    the evidence, as its moves to not_met or unverifiable are, so it stands on the earlier judgment's frames (shown,
    and backing more than it now claims) instead of restoring the earlier credit."""
    return guard == "credit" and STATUS_WEIGHT[new.status] < STATUS_WEIGHT[old.status] and bool(old.evidence_frames)


def guard_judgments(before: Assessment, after: Assessment, shown: Collection[int], stage: str,
                    guard: Guard) -> tuple[Assessment, list[str]]:
    """`after`'s judgments, each replaced by `before`'s when `unbacked` (a judgment `before` lacks counts as
    unverifiable there, and is added as unverifiable), or given `before`'s evidence frames when it lowers credit in
    "credit" mode (`lowered`), with one note per judgment replaced."""
    notes: list[str] = []
    judgments = []
    for j in after.judgments:
        old = before.judgment(j.requirement_id)
        backed = bool(split_shown(j.evidence_frames, shown)[0])
        if not unbacked(j, old.status if old is not None else "unverifiable", backed, guard):
            judgments.append(j)
        elif old is not None and lowered(j, old, guard):
            notes.append(f"{stage}: {j.requirement_id} lowered to {j.status} with the earlier evidence frames "
                         f"{old.evidence_frames} (it cited no frame shown; the earlier {old.status} is not restored)")
            judgments.append(j.model_copy(update={"evidence_frames": list(old.evidence_frames)}))
        elif old is None:
            notes.append(f"{stage}: {j.requirement_id} added as unverifiable ({j.status} cited no frame shown)")
            judgments.append(j.model_copy(update={"status": "unverifiable"}))
        else:
            notes.append(f"{stage}: {j.requirement_id} kept {old.status} " + (
                f"(change to {j.status} cited no frame shown)" if old.status != j.status
                else f"with its earlier evidence frames {old.evidence_frames} (restated citing no frame shown)"))
            judgments.append(old)
    return after.model_copy(update={"judgments": judgments}), notes


LEVELS = ("physical_level", "visual_level")
_KEPT_WHY = {"changes": "a scope repair does not re-rate the rubric",
             "credit": "a reflection does not raise a rubric level: its evidence covers part of the clip"}


def guard_levels(before: Assessment, after: Assessment, stage: str, guard: Guard) -> tuple[Assessment, list[str]]:
    """`after` with `before`'s level and rationale for each rubric level it may not change in mode `guard` (module
    docstring), and a note per level kept."""
    update: dict[str, object] = {}
    notes: list[str] = []
    for name in LEVELS:
        old, new = getattr(before, name), getattr(after, name)
        if new != old and (guard == "changes" or new > old):
            why = name.replace("_level", "_rationale")
            update |= {name: old, why: getattr(before, why)}
            notes.append(f"{stage}: {name} kept {old} ({_KEPT_WHY[guard]}; it returned {new})")
    return (after.model_copy(update=update) if update else after), notes


def keep_omitted(before: Assessment, after: Assessment, contract: TaskContract,
                 stage: str) -> tuple[Assessment, list[str]]:
    """`after` with the judgments it left out carried over from `before`, plus a note per kept judgment.

    A revision (reflect, repair) is asked for the full assessment, but models often return only the
    requirements under discussion; a judgment that silently vanished would score as unverifiable (T
    drops, and the gate may read it as an essential gap) without anyone having looked again."""
    kept = [j for r in contract.requirements
            if after.judgment(r.id) is None and (j := before.judgment(r.id)) is not None]
    if not kept:
        return after, []
    order = {r.id: k for k, r in enumerate(contract.requirements)}
    judgments = sorted([*after.judgments, *kept], key=lambda j: order[j.requirement_id])
    notes = [f"{stage}: {j.requirement_id} kept {j.status} (the revised assessment left it out)" for j in kept]
    return after.model_copy(update={"judgments": judgments}), notes


def revise(before: Assessment, reply: Assessment, contract: TaskContract, n_frames: int, shown: Collection[int],
           backing: Collection[int], stage: str, guard: Guard) -> tuple[Assessment, list[str], list[str], list[str]]:
    """(revised assessment, tidy and scoring notes, guard notes, omitted-judgment notes) for a revision's `reply`
    to `before` (module docstring): citations checked against `shown` (the frames the model was shown in the run,
    the node's own included), changes guarded against `backing` (the frames that may back them), rubric levels
    guarded (`guard_levels`; their notes are guard notes)."""
    out, fixes = tidy_refs(reply, contract, n_frames, shown, stage)
    out, guarded = guard_judgments(before, out, backing, stage, guard)
    out, levels = guard_levels(before, out, stage, guard)
    guarded += levels
    out, scored = score_uncited(out, stage)
    out, omitted = keep_omitted(before, out, contract, stage)
    return out, fixes + scored, guarded, omitted
