"""Evidence a run computes in the background (surprise scores, extra tools): starting it, and its failures.

Only reflect uses that evidence, so the quality step starts it in worker threads (`start_evidence`) and
its nodes await it just before reflect (see graph.nodes.surprise). A failure known earlier ends the run
at the next model call instead of after all of them: assess and each inspect round call
`raise_if_failed` first, and the fault is recorded under the evidence's own stage ("surprise", or the
extra node's "extra"), exactly as if that node had run. Work still running is not waited for here.
Both look only at the evidence the run's config uses (`_uses`).
"""

from __future__ import annotations

from concurrent.futures import Future

from graph.context import RunContext
from graph.nodes.common import EvidenceFailed, frames_total
from graph.nodes.extra import hurry_extra, start_extra, started_extra
from graph.nodes.surprise import hurry_surprise, start_surprise, started_surprise
from graph.routes import expected_nodes
from graph.state import AgentState


def _uses(ctx: RunContext) -> tuple[bool, bool]:
    """(surprise, extra tools): whether the run's config wires these nodes (`graph.routes.expected_nodes`)."""
    nodes = expected_nodes(ctx.config, extra=bool(ctx.tools.extra))
    return "surprise" in nodes, "extra" in nodes


def start_evidence(ctx: RunContext, video: str, frames: int, instruction: str, thread_id: str) -> None:
    """Start the surprise scoring and the extra tools the run uses (called by quality for a usable clip)."""
    surprise, extra = _uses(ctx)
    if surprise:
        start_surprise(ctx, video, frames)
    if extra:
        start_extra(ctx, video, frames, instruction, thread_id)


def hurry_evidence(state: AgentState, ctx: RunContext, thread_id: str) -> None:
    """Move the run's surprise scoring and extra tools to priority "now" where they are still queued at
    "later" (called by assess; see graph.nodes.surprise)."""
    (surprise, extra), n = _uses(ctx), frames_total(state)
    if surprise:
        hurry_surprise(ctx, state["video"], n)
    if extra:
        hurry_extra(ctx, state["video"], n, state["instruction"], thread_id)


def _failure(job: Future | None) -> BaseException | None:
    return job.exception() if job is not None and job.done() and not job.cancelled() else None


def raise_if_failed(state: AgentState, ctx: RunContext, thread_id: str) -> None:
    """Raise EvidenceFailed when the run's surprise scoring or an extra tool has already failed. Only the
    evidence the run's own config uses is looked at: surprise jobs are shared by every run of a clip that
    shares the frame cache, including runs of presets without WMReward."""
    (surprise, extra), n = _uses(ctx), frames_total(state)
    jobs: list[tuple[str, Future | None]] = []
    if surprise:
        jobs.append(("surprise", started_surprise(ctx, state["video"], n)))
    if extra:
        jobs += [("extra", j) for j in started_extra(ctx, state["video"], n, state["instruction"], thread_id)]
    for stage, job in jobs:
        if (error := _failure(job)) is not None:
            raise EvidenceFailed(stage, error)
