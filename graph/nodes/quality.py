"""quality node: input checks, decoding and the quality pre-check (DESIGN.md §3, paper Sec. 3.2).

Order: instruction checks (empty/whitespace -> input Fault, ineligible; longer than
`max_instruction_chars` -> truncated with a note), probe + decode of the uniform sample
(VideoError -> Fault, ineligible; so is a clip whose full-size sample would exceed the decode limit,
`tools.video_limits`: a 16K clip's 32 frames are 12.7 GB), then `tools.quality.check_quality`: spatially
uniform or unusable content (e.g. fewer than 2 decodable frames) gets reward 0 here, before any model call or
tool run.

Decisions where the issue was silent: clips of at most 81 frames are decoded completely here in one
sequential pass (every frame may be viewed later, and seeking for single frames costs more) when
they take at most a quarter of the frame cache (256x256 to 480x832 clips do; 81 frames of 720p do not, and
only their sample is decoded here); once the
sample is decoded, the encoding of observe's images starts in another worker thread
(`FrameStore.start_encoding`) while the statistics run here (wasted for a clip that is then zeroed);
a clip whose container reports fewer than 2 frames is zeroed without calling check_quality (nothing
to compare); a clip that cannot be opened at all (missing, 0 bytes, not a video) is ineligible, not zero.
An HDR clip (PQ or HLG) is judged on its frames as decoded, not tone-mapped (`tools.video_hdr`), with a note; the
transfer is asked after the sample is decoded, whose frames give it where the headers do not (an MPEG-TS clip), and
not for a clip of under 2 frames (zeroed, no frame judged).
A thread that already holds a run (a second input sent with `agent.invoke(..., {"thread_id": same})`, or
a Studio thread reused) is refused with a "settings" Fault (`graph.nodes.faults.RunIdTaken`): its steps, faults,
usage and frozen contract would carry over into the new run (the contract write raised; a stale fault made the run
skip every stage). `score_video` / `ascore_videos` refuse a reused run id before invoking, with a "settings" fault
too (`graph.run_results.run_id_taken`): one situation, one kind, the call's own setting and not the clip, so an outage that
a resume retries under a new id (it was an "input" fault here, the clip's own ⊥, final for a resume). The compiled
agent (`graph.thread_guard`) refuses it before LangGraph checkpoints the input; this check remains for the calls
it does not see.
The probe and the encoding run at worker priority "first" (`graph.workers`): ahead of the tool jobs of
runs already past their first model call, so the last clip of a burst is not held up by them.
A usable clip's surprise scoring and extra evidence tools start here, in worker threads (only reflect
needs them; see graph.nodes.surprise); a zeroed or ineligible clip starts neither.
"""

from __future__ import annotations

from typing import Any

from graph.clip_stamp import clip_stamp
from graph.context import RunContext
from graph.nodes.background import start_evidence
from graph.nodes.common import InputFault, Step
from graph.nodes.faults import RunIdTaken
from graph.state import AgentState
from graph.workers import run_blocking
from tools.video_hdr import hdr_note


def check_instruction(instruction: object, max_chars: int) -> tuple[str, list[str]]:
    """(instruction to use, notes); raises InputFault for a missing or blank instruction."""
    if not isinstance(instruction, str):
        raise InputFault(f"instruction must be a string, got {type(instruction).__name__}")
    if not instruction.strip():
        raise InputFault("instruction is empty or whitespace only")
    text = instruction.strip()
    if len(text) > max_chars:
        return text[:max_chars], [f"instruction truncated from {len(text)} to {max_chars} characters"]
    return text, []


def _probe_and_check(ctx: RunContext, video: str, observe_frames: int) -> tuple[Any, list[int], Any, Any, str | None]:
    """(meta, sample, QualityCheck or None when under 2 frames, the file's `clip_stamp`, its HDR transfer): one
    worker-thread hop for all decoding."""
    from tools.quality import check_quality
    from tools.video import ALL_FRAMES_LIMIT, uniform_indices

    meta = ctx.frames.meta(video)
    if meta.frames < 2:
        return meta, [], None, clip_stamp(video), None
    sample = uniform_indices(meta.frames, observe_frames)
    # short clip: one sequential decode of every frame (all are viewable), when they take at most a
    # quarter of the frame cache (81 frames of 1080p are 0.5 GB: prefetched, they would evict the frames
    # of every other run in flight, and their own sample)
    if meta.frames <= ALL_FRAMES_LIMIT and ctx.frames.fits(meta, meta.frames, share=0.25):
        ctx.frames.prefetch(video, range(meta.frames))
    frames = ctx.frames.frame_list(video, sample)
    ctx.frames.start_encoding(video, sample)  # observe's images, encoded while the statistics run
    check = check_quality(frames, thresholds=ctx.tools.quality_thresholds)
    hdr = ctx.frames.hdr(video)  # after the sample's decode, which found it where the headers are silent
    return meta, sample, check, clip_stamp(video), hdr  # the file judged (`graph.clip_stamp`)


async def quality(state: AgentState, ctx: RunContext, step: Step) -> dict[str, Any]:
    cfg = ctx.config
    if state.get("steps") or state.get("result") is not None:
        # the run's channels (steps, faults, usage, audits, the frozen contract) would carry over into the new one
        raise RunIdTaken(f"this thread already holds a run ({len(state.get('steps') or [])} steps); score a new "
                         "input on a new thread id (the run id)")
    update: dict[str, Any] = {**ctx.run_settings(), "zero": False}
    if step.thread_id and not state.get("run_id"):
        update["run_id"] = step.thread_id
    instruction, notes = check_instruction(state.get("instruction"), cfg.max_instruction_chars)
    update["instruction"] = instruction
    update["notes"] = notes
    video = state.get("video")
    if not isinstance(video, str) or not video:
        raise InputFault(f"video must be a non-empty path string, got {video!r}")
    meta, sample, check, stamp, hdr = await run_blocking(_probe_and_check, ctx, video, cfg.observe_frames,
                                                         priority="first")
    update["meta"] = {"frames": meta.frames, "fps": meta.fps, "width": meta.width, "height": meta.height,
                      "duration": meta.duration, "rotation": meta.rotation, "file": stamp}
    if (note := hdr_note(hdr)) is not None:  # frames not tone-mapped: tools/video_hdr.py
        notes.append(note)
    if check is None:
        update["zero"] = True
        update["quality"] = {"usable": False, "uniform": False, "decodable_frames": meta.frames,
                             "reason": f"only {meta.frames} frame(s)"}
        step.decision = f"zero: only {meta.frames} frame(s)"
        return update
    update["sample"] = sample
    update["quality"] = check.model_dump(mode="json")
    step.frames = list(sample)
    if check.uniform or not check.usable:
        update["zero"] = True
        step.decision = f"zero: {check.reason or ('uniform content' if check.uniform else 'unusable')}"
    else:
        step.decision = f"usable: {meta.frames} frames, {len(sample)} sampled"
        start_evidence(ctx, video, meta.frames, instruction, step.thread_id)
    return update

