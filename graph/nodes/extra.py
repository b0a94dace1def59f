"""extra node: your own evidence tools (`tools.extra`), once per clip (paper Sec. 3.2, "Extend the
Evidence Tools").

Runs beside observe, contract and surprise when the agent has extra tools and its preset has reflect,
which shows the reports. Each tool gets the clip's frames (the first `MAX_EXTRA_FRAMES`) and the
instruction in a worker thread; the tools of one clip run concurrently. Frames have a short side of at
most `extra_short_side` (448; `RAA_EXTRA_SHORT_SIDE`, `AgentTools.extra_short_side`, None = full size):
512 full-size frames of a 1080p clip are 3.2 GB. A tool that raises or returns
something other than an EvidenceReport records a Fault (ineligible). Reports never enter the reward.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import ValidationError

from graph.context import RunContext
from graph.nodes.common import Step, count, frames_total
from graph.state import AgentState
from graph.workers import run_blocking
from tools.errors import ToolFault, run_tool
from tools.extra import EvidenceReport, EvidenceTool

MAX_EXTRA_FRAMES = 512


def _evaluate(ctx: RunContext, tool: EvidenceTool, video: str, used: int, instruction: str) -> EvidenceReport:
    """Decode the frames (shared frame cache) and run one tool: one worker-thread hop."""
    frames = ctx.frames.scaled_frames(video, range(used), ctx.tools.extra_short_side)
    out = run_tool(tool.name, tool.evaluate, frames, instruction)
    if isinstance(out, EvidenceReport):
        return out
    if isinstance(out, dict):
        try:
            return EvidenceReport.model_validate(out)
        except ValidationError as exc:
            raise ToolFault(tool.name, "run", f"its report is invalid: {exc}") from exc
    raise ToolFault(tool.name, "run", f"returned {type(out).__name__}, not an EvidenceReport")


async def extra(state: AgentState, ctx: RunContext, step: Step) -> dict[str, Any]:
    n = frames_total(state)
    used = min(n, MAX_EXTRA_FRAMES)
    tools = ctx.tools.extra
    reports = await asyncio.gather(*(run_blocking(_evaluate, ctx, t, state["video"], used, state["instruction"])
                                     for t in tools))
    records, dropped = [], 0
    for tool, report in zip(tools, reports, strict=True):
        frames = [f for f in report.frames if 0 <= f < n]
        dropped += len(report.frames) - len(frames)
        records.append({"tool": tool.name, "summary": report.summary, "frames": frames, "values": report.values})
        step.tool_summaries.append(f"{tool.name}: {report.summary[:300]}")
        step.frames += frames
    step.decision = f"{count(len(records), 'report')}" + (f"; {count(dropped, 'frame reference')} outside the clip dropped"
                                                          if dropped else "")
    notes = [f"extra evidence tools saw the first {used} of {n} frames"] if used < n else []
    return {"extra_evidence": records, "notes": notes}
