"""extra node: your own evidence tools (`tools.extra`), once per clip (paper Sec. 3.2, "Extend the
Evidence Tools").

Runs when the agent has extra tools and its preset has reflect, which shows the reports. Each tool gets
the clip's frames (the first `MAX_EXTRA_FRAMES`) and the instruction in a worker thread; the tools of one
clip run concurrently. Like the surprise scorer (see graph.nodes.surprise), they run beside the rest of
the run: the quality step starts them once the clip is usable (`start_extra`) and this node, wired just
before reflect (after surprise), awaits them; the trace step gives each tool's own time. A tool that
fails makes the run ineligible: before the run's next model call when the failure is already known
(graph.nodes.background), else here. Frames have a short side of at
most `extra_short_side` (448; `RAA_EXTRA_SHORT_SIDE`, `AgentTools.extra_short_side`, None = full size):
512 full-size frames of a 1080p clip are 3.2 GB. A tool that raises or returns
something other than an EvidenceReport records a Fault (ineligible). Reports never enter the reward.
A tool's job is keyed by the run, the tool itself (`tools.extra.extra_tool_identity`) and what it is given: keyed
by its place in the agent's list, another agent's tool at that place sharing the frame cache and the run id took
its report.
"""

from __future__ import annotations

import asyncio
import functools
import time
from concurrent.futures import Future
from typing import Any, Literal, overload

from pydantic import ValidationError

from graph.context import RunContext
from graph.nodes.common import Step, brief, count, frames_total
from graph.state import AgentState
from graph.workers import Priority, await_job
from tools.errors import ToolFault, run_tool
from tools.extra import EvidenceReport, EvidenceTool, extra_tool_identity

MAX_EXTRA_FRAMES = 512


def _evaluate(ctx: RunContext, tool: EvidenceTool, video: str, used: int,
              instruction: str) -> tuple[EvidenceReport, float]:
    """Decode the frames (shared frame cache) and run one tool: one worker-thread job. Returns (report,
    seconds it took)."""
    t0 = time.perf_counter()
    frames = ctx.frames.scaled_frames(video, range(used), ctx.tools.extra_short_side)
    out = run_tool(tool.name, tool.evaluate, frames, instruction)
    if isinstance(out, dict):
        try:
            out = EvidenceReport.model_validate(out)
        except ValidationError as exc:
            raise ToolFault(tool.name, "run", f"its report is invalid: {exc}") from exc
    if not isinstance(out, EvidenceReport):
        raise ToolFault(tool.name, "run", f"returned {type(out).__name__}, not an EvidenceReport")
    return out, time.perf_counter() - t0


@overload
def _job(ctx: RunContext, k: int, video: str, frames: int, instruction: str, thread_id: str, *,
         start: Literal[True], priority: Priority = "now") -> Future: ...
@overload
def _job(ctx: RunContext, k: int, video: str, frames: int, instruction: str, thread_id: str, *,
         start: bool, priority: Priority = "now") -> Future | None: ...
def _job(ctx: RunContext, k: int, video: str, frames: int, instruction: str, thread_id: str, *,
         start: bool, priority: Priority = "now") -> Future | None:
    """Extra tool `k`'s job for the run: the one already started (`start` False: None when there is none),
    or started now at `priority` (`start` True; a failed one is started afresh, and one still queued at
    "later" is queued again at "now" when `priority` is "now")."""
    used = min(frames, MAX_EXTRA_FRAMES)
    tool = ctx.tools.extra[k]
    key = ("extra", ctx.frames.current(video), thread_id, k, extra_tool_identity(tool), used,
           ctx.tools.extra_short_side, instruction)  # the tool, not only its place (module docstring)
    if not start:
        return ctx.frames.started_job(key)
    return ctx.frames.shared_job(key, functools.partial(_evaluate, ctx, tool, video, used, instruction), priority)


def start_extra(ctx: RunContext, video: str, frames: int, instruction: str, thread_id: str) -> None:
    """Start the extra tools on the run's clip in worker threads; the extra node awaits them. Called by the
    quality step once the clip is usable. They are queued at priority "later" until `hurry_extra`, like the
    surprise scoring (see graph.nodes.surprise)."""
    for k in range(len(ctx.tools.extra)):
        _job(ctx, k, video, frames, instruction, thread_id, start=True, priority="later")


def hurry_extra(ctx: RunContext, video: str, frames: int, instruction: str, thread_id: str) -> None:
    """Move each of the run's started extra-tool jobs still queued at "later" to priority "now" (a job that is
    running or done is left as it is, a failed one included). Called by assess and by the extra node."""
    for k in range(len(ctx.tools.extra)):
        job = _job(ctx, k, video, frames, instruction, thread_id, start=False)
        if job is not None and not job.done():
            _job(ctx, k, video, frames, instruction, thread_id, start=True)


def started_extra(ctx: RunContext, video: str, frames: int, instruction: str, thread_id: str) -> list[Future]:
    """The run's extra-tool jobs that were started (running or done)."""
    jobs = (_job(ctx, k, video, frames, instruction, thread_id, start=False) for k in range(len(ctx.tools.extra)))
    return [j for j in jobs if j is not None]


async def extra(state: AgentState, ctx: RunContext, step: Step) -> dict[str, Any]:
    n = frames_total(state)
    used = min(n, MAX_EXTRA_FRAMES)
    tools = ctx.tools.extra
    args = (state["video"], n, state["instruction"], step.thread_id)
    hurry_extra(ctx, *args)
    jobs = [_job(ctx, k, *args, start=False) or _job(ctx, k, *args, start=True) for k in range(len(tools))]
    outcomes = await asyncio.gather(*(await_job(j) for j in jobs))
    records, dropped = [], 0
    for tool, (report, seconds) in zip(tools, outcomes, strict=True):
        frames = [f for f in report.frames if 0 <= f < used]  # the tool saw frames 0..used-1 only
        dropped += len(report.frames) - len(frames)
        records.append({"tool": tool.name, "summary": report.summary, "frames": frames, "values": report.values})
        step.tool_summaries.append(f"{tool.name} ({seconds:.2f} s): {brief(report.summary)}")
        step.frames += frames
    step.decision = f"{count(len(records), 'report')}" + (f"; {count(dropped, 'frame reference')} outside the frames the tools saw dropped"
                                                          if dropped else "")
    notes = [f"extra evidence tools saw the first {used} of {n} frames"] if used < n else []
    return {"extra_evidence": records, "notes": notes}
