"""reflect node: a revised assessment from the gathered evidence (paper Sec. 3.2).

Evidence shown: the frames, crops and track overlays returned during inspection (with the tool
result texts and the inspector's closing notes) and, when WMReward is on, the most surprising
windows (a few frames of each, with their surprise values). Tools inform judgment only: the reward
is still computed from the revised structured assessment by fixed code.

Decisions where the issue was silent:
- Motion on but inspection off (preset no_visual_verify): one automatic grid track over the uniform
  sample runs here and its summary and overlays are shown (MotionEvidence is recorded, with the number of
  points actually tracked: a grid keeps between GRID_SIZE**2 and three times that, `tools.motion.grid`).
- Extra evidence tools (`tools.extra`): each report's summary and values, and up to 4 of its frames.
- Surprise of a long clip: the scorer sees its first `MAX_SURPRISE_FRAMES` (512, graph.nodes.surprise), and the
  prompt says which frames that was and that the rest have no surprise evidence: the notes of the result said so,
  but the model read the windows shown as the clip's most surprising, and a long clip's end unsurprising. So for
  the extra tools' reports (`MAX_EXTRA_FRAMES`, graph.nodes.extra).
- Surprise windows: a window's surprise measures only how badly its predicted part (the frames after its
  `context_frames` context frames, 8 of 16 by default, see tools.surprise) was predicted, so the frames
  shown are the last context frame (for reference: what the prediction started from) and 3 frames spread
  over the predicted part, first and last included; before, 4 frames were spread over the whole window,
  half of them context frames that say nothing about the surprise. With stride 2 the most surprising
  windows are mostly neighbours around one event, so the windows shown are chosen greedily by surprise
  (ties: the earlier window) from all scored windows, skipping a window whose predicted frames overlap
  those of one already chosen: up to `surprise_windows` distinct events, and the prompt says so. The
  choice depends only on the evidence, so the same inputs render the same prompt (stage cache).
- The surprise windows' frames and the extra tools' frames do not spend the long-clip allowance of 16 extra frames
  (`graph.nodes.evidence.allowance`): the paper ties that limit to verification (the re-inspection of uncertain
  judgments, which on a long clip may look at at most 16 frames near the sampled ones) and hands WMReward's feedback
  to a later visual reflection, a separate module; its ablations take out one module and leave the other modules'
  evidence as it was, which a shared allowance would break (once inspection spent it, the surprise reflection of a long
  clip would show no frames: WMReward's evidence would depend on the verification module). These frames are chosen by the tools, not the model, and bounded
  (`surprise_windows` x 4, 4 per report, all under `max_images_per_call`).
- A revised met or partial citing no frame the model was shown keeps the earlier judgment
  (`graph.nodes.revision.guard_judgments`, mode "credit", as repair's image-backed rule): it was scored as
  unverifiable, so restating an image-backed met on an unshown frame label lost its credit. The model's own moves
  to not_met or unverifiable stand, and so does its lowering of met to partial (on met's earlier frames).
- The rubric levels may be lowered, not raised (`graph.nodes.revision.guard_levels`, mode "credit"): they cite no
  frames, and this evidence covers part of the clip; a raise keeps the earlier level and rationale, with a note.
- Images are capped at `max_images_per_call`: surprise frames first (at most 4 per window), then the
  motion overlays and the extra tools' frames (at most 4 per report), then the most recent inspection
  images. The step's `frames` are those of the images sent: they listed every inspection frame (and
  every surprise and extra-tool frame), also those left out, so `raa trace` showed frames as used that
  the model never saw. Its `crops` are the inspection crops among them (it listed none, so the trace did not say
  that the revision saw a crop rather than the full frame).
"""

from __future__ import annotations

from typing import Any

from graph.context import RunContext
from graph.nodes import extra as extra_node
from graph.nodes.assess import summarize
from graph.nodes.common import (
    Step,
    brief,
    dump,
    frames_total,
    human,
    shown_frames,
    system,
)
from graph.nodes.contract_of import need_contract
from graph.nodes.evidence import crop_records, exchange_blocks
from graph.nodes.revision import revise
from graph.nodes.tracking import track_overlays
from graph.schemas import Assessment, MotionEvidence
from graph.state import AgentState

FRAMES_PER_WINDOW = 4

Images = list[tuple[int, list[dict]]]
"""(frame, [label block, image block]) per image, so what is sent and the frames it shows stay together."""


def _images(frames: list[int], blocks: list[dict]) -> Images:
    """`blocks` (a label and an image per frame, as `FrameStore` builds them) paired with their `frames`."""
    if len(blocks) != 2 * len(frames):
        raise ValueError(f"{len(blocks)} content blocks for {len(frames)} frames (a label and an image each)")
    return [(int(f), blocks[2 * k:2 * k + 2]) for k, f in enumerate(frames)]


def distinct_windows(ev: dict, k: int) -> list[dict]:
    """Up to `k` windows of surprise evidence `ev` (a dumped tools.surprise.SurpriseEvidence), most surprising
    first, no two of them sharing a predicted frame (`tools.surprise.distinct_windows` over all its windows).
    See module docstring."""
    from tools.surprise import SurpriseWindow
    from tools.surprise import distinct_windows as pick

    windows = [SurpriseWindow.model_validate(w) for w in ev.get("windows") or ev.get("top") or []]
    return [w.model_dump(mode="json") for w in pick(windows, k, int(ev.get("context_frames") or 8))]


def window_picks(w: dict, context: int, n: int) -> tuple[int | None, list[int]]:
    """(reference frame, predicted frames) shown for window `w` in a clip of `n` frames: its last context frame
    (None when it has none) and up to FRAMES_PER_WINDOW - 1 frames spread over its predicted part."""
    from tools.surprise import split_window
    from tools.video import uniform_subset

    before, predicted = split_window(w.get("frames") or range(w["start"], w["end"] + 1), context)
    predicted = [f for f in predicted if 0 <= f < n]
    reference = before[-1] if before and 0 <= before[-1] < n else None
    return reference, uniform_subset(predicted, FRAMES_PER_WINDOW - 1) if predicted else []


async def _surprise_part(state: AgentState, ctx: RunContext) -> tuple[str, Images]:
    ev = state.get("surprise")
    if not ctx.config.wmreward or not ev:
        return "", []
    if ev.get("status") != "ok" or not (ev.get("windows") or ev.get("top")):  # `top` may be empty (top_k 0)
        return f"\n\nWorld-model surprise: {ev.get('status')}, no windows.", []
    context = int(ev.get("context_frames") or 8)
    text = ("\n\nWorld-model surprise (mean {:.3f}); the most surprising windows whose predicted frames do not "
            "overlap (distinct events; each window predicts the frames after its first {} context frames, and "
            "its surprise is about those):").format(ev.get("mean") or 0.0, context)
    images: Images = []
    n = frames_total(state)
    scored = int(ev.get("num_frames") or n)
    if scored < n:  # a long clip's first MAX_SURPRISE_FRAMES (graph.nodes.surprise): say what is not covered
        text += (f"\n(The world model scored frames 0..{scored - 1} of the clip's {n} only: frames {scored}..{n - 1} "
                 "have no surprise evidence, which says nothing about them.)")
    for w in distinct_windows(ev, ctx.config.surprise_windows):
        reference, picks = window_picks(w, context, n)
        if not picks:
            continue
        shown = ([reference] if reference is not None else []) + picks
        text += (f"\n- frames {w['start']}..{w['end']} (predicted {picks[0]}..{picks[-1]}): surprise "
                 f"{w['surprise']:.3f} (shown: " + (f"context frame {reference}, " if reference is not None else "")
                 + f"predicted frames {picks})")
        images += _images(shown, await ctx.frames.ablocks(state["video"], shown,
                                                          note=f"surprise window {w['start']}-{w['end']}"))
    return text, images


async def _extra_part(state: AgentState, ctx: RunContext) -> tuple[str, Images]:
    """Reports of the extra evidence tools (`tools.extra`), with up to 4 of the frames each points to."""
    from tools.video import uniform_subset

    reports = state.get("extra_evidence") or []
    if not reports:
        return "", []
    text = ("\n\nReports of extra evidence tools (claims of other programs: check each against the contract and "
            "the frames before changing a judgment):")
    n, seen = frames_total(state), extra_node.MAX_EXTRA_FRAMES
    if seen < n:  # a long clip: the tools got its first frames only (graph.nodes.extra)
        text += f"\n(The tools saw frames 0..{seen - 1} of the clip's {n} only: frames {seen}..{n - 1} were not evaluated.)"
    images: Images = []
    for r in reports:
        values = ", ".join(f"{k}={v:.4g}" for k, v in r["values"].items())
        picks = uniform_subset(r["frames"], FRAMES_PER_WINDOW) if r["frames"] else []
        text += f"\n- {r['tool']}: {r['summary']}" + (f" [{values}]" if values else "") + \
            (f" (frames shown: {picks})" if picks else "")
        if picks:
            images += _images(picks, await ctx.frames.ablocks(state["video"], picks, note=f"{r['tool']} frame"))
    return text, images


async def _auto_motion(state: AgentState, ctx: RunContext, step: Step) -> tuple[str, Images, Any]:
    from tools.video import uniform_subset

    if not ctx.config.motion or ctx.config.visual_verify:
        return "", [], None
    sample = list(state["sample"])
    shown = uniform_subset(sample, 4)
    blocks, summary, points = await track_overlays(state, ctx, sample, [], shown)
    step.tool_summaries.append(f"track_motion(grid over sample): {brief(summary)}")
    evidence = MotionEvidence(frames=sample, points=points, summary=summary[:4000])
    return "\n\nMotion tracks over the sampled frames:\n" + summary, _images(shown, blocks), evidence


async def reflect(state: AgentState, ctx: RunContext, step: Step) -> dict[str, Any]:
    cfg = ctx.config
    contract, assessment = need_contract(state), state["assessment"]
    text = "Task contract:\n" + dump(contract) + "\n\nCurrent assessment:\n" + dump(assessment)
    inspected: Images = []
    crops: list[dict[str, Any] | None] = []  # per inspection image: its crop record (None: not a crop)
    exchanges = list(state.get("exchanges", []))
    if exchanges:
        text += "\n\nInspection results:"
        for e in exchanges:
            text += f"\n- {e['name']}({e['args']}): {e['text']}"
            images = _images(list(e.get("frames", [])), await exchange_blocks(state, ctx, e))
            inspected += images
            crops += [next(iter(crop_records([e])), None)] * len(images)
    if state.get("inspect_notes"):
        text += "\n\nInspector's notes: " + str(state["inspect_notes"])
    motion_text, motion_images, motion = await _auto_motion(state, ctx, step)
    surprise_text, surprise_images = await _surprise_part(state, ctx)
    extra_text, extra_images = await _extra_part(state, ctx)
    text += motion_text + surprise_text + extra_text
    cap = cfg.max_images_per_call
    fixed = surprise_images + motion_images + extra_images
    if len(fixed) > cap:  # many surprise windows or extra tools: keep the first ones
        text += (f"\n\n({len(fixed) - cap} of the evidence images above are left out: "
                 f"one request carries at most {cap}.)")
        fixed = fixed[:cap]
    room = cap - len(fixed)
    sent = fixed + (inspected[-room:] if room > 0 else [])  # the most recent inspection images
    step.crops = [c for c in (crops[-room:] if room > 0 else []) if c is not None]  # the crops among them
    if not sent:
        sample = list(state["sample"])
        sent = _images(sample, await ctx.frames.ablocks(state["video"], sample))
        text += "\n\n(No inspection images; the sampled frames follow.)"
    step.frames += [f for f, _ in sent]  # the frames of the images sent, not of those left out
    evidence = [b for _, pair in sent for b in pair]
    text += "\n\nReturn the full revised assessment."
    out = await ctx.backbone.astructured("reflect", Assessment, [system("reflect"), human(text, evidence)],
                                         step.usage)
    shown = shown_frames(state) | {f for f, _ in sent}
    out, fixes, guarded, omitted = revise(assessment, out, contract, frames_total(state), shown, shown, "reflect",
                                          "credit")
    step.decision = "revised: " + summarize(out) + (f"; {len(omitted)} omitted judgment(s) kept" if omitted else "") \
        + (f"; {len(guarded)} unbacked change(s) guarded" if guarded else "") \
        + (f"; {len(fixes)} judgment fix(es) noted" if fixes else "")
    notes = fixes + guarded + omitted
    update: dict[str, Any] = {"assessment": out, "assessments": [out]}
    if notes:
        update["notes"] = notes
    if motion is not None:
        update["motion"] = motion
    return update
