"""surprise node (WMReward on): V-JEPA 2 prediction surprise, once per clip (paper Sec. 3.2).

Runs beside observe and contract; reflect shows the most surprising windows. The surprise values
never enter the reward formula. A scorer that fails to load or run raises ToolFault (ineligible).

Decisions where the issue was silent: scoring runs in a worker thread at priority "now": assess
joins on this node, so a run cannot go on without it (an earlier "later" priority let concurrent
runs' frame work starve it and made assess wait on it; see graph.workers). With the tool service
configured it runs in the "io" lane. Clips longer than 512 frames are scored on their first 512
frames (windows need consecutive frames) and a note records it. The scorer gets frames whose short
side is at most `ToolProvider.surprise_short_side` (448 by default: V-JEPA 2 brings it to 292 or 438
before its crop anyway), decoded straight to that size: 512 frames of a 1080p clip took 3.2 GB at
full size (twice that while stacking), ~0.5 GB now. With the tool service (`RemoteSurpriseScorer`)
the node uploads the encoded clip and the service decodes it the same way: the frames themselves were
hundreds of MB per clip for long clips, over the service's default 256 MiB upload limit.
"""

from __future__ import annotations

from typing import Any

from graph.context import RunContext
from graph.nodes.common import Step, count, frames_total
from graph.state import AgentState
from graph.workers import run_blocking
from tools.errors import run_tool

MAX_SURPRISE_FRAMES = 512


def _score(ctx: RunContext, video: str, used: int) -> Any:
    """Load the scorer (lazily), decode the frames and score them: one worker-thread hop."""
    from tools.client import RemoteSurpriseScorer

    scorer = ctx.tools.surprise()
    short_side = ctx.tools.surprise_short_side
    if isinstance(scorer, RemoteSurpriseScorer):  # the service decodes the clip: upload the file, not the frames
        return run_tool("surprise", scorer.score_file, video, frames=used, short_side=short_side)
    return run_tool("surprise", scorer.score, ctx.frames.scaled_frames(video, range(used), short_side))


async def surprise(state: AgentState, ctx: RunContext, step: Step) -> dict[str, Any]:
    n = frames_total(state)
    used = min(n, MAX_SURPRISE_FRAMES)
    evidence = await run_blocking(_score, ctx, state["video"], used, lane=ctx.tools.lane)
    top = ", ".join(f"{w.start}-{w.end}:{w.surprise:.3f}" for w in evidence.top[:3])
    step.decision = f"{evidence.status}; {count(len(evidence.windows), 'window')}; top {top or 'none'}"
    step.tool_summaries = [evidence.text()[:500]]
    notes = [f"surprise scored on the first {used} of {n} frames"] if used < n else []
    return {"surprise": evidence.model_dump(mode="json"), "notes": notes}
