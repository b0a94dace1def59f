"""Failures of the evidence a run computes in the background (surprise scores, extra tools).

The quality step starts that work in worker threads and its nodes await it just before reflect (see
graph.nodes.surprise). A failure known earlier ends the run at the next model call instead of after
all of them: assess and each inspect round call `raise_if_failed` first, and the fault is recorded
under the evidence's own stage ("surprise", or the extra node's "extra"), exactly as if that node had
run. Work still running is not waited for here.
"""

from __future__ import annotations

from concurrent.futures import Future

from graph.context import RunContext
from graph.nodes.common import EvidenceFailed, frames_total
from graph.nodes.extra import started_extra
from graph.nodes.surprise import started_surprise
from graph.state import AgentState


def _failure(job: Future | None) -> BaseException | None:
    return job.exception() if job is not None and job.done() and not job.cancelled() else None


def raise_if_failed(state: AgentState, ctx: RunContext, thread_id: str) -> None:
    """Raise EvidenceFailed when the run's surprise scoring or an extra tool has already failed."""
    n = frames_total(state)
    jobs = [("surprise", started_surprise(ctx, state["video"], n))]
    jobs += [("extra", j) for j in started_extra(ctx, state["video"], n, state["instruction"], thread_id)]
    for stage, job in jobs:
        if (error := _failure(job)) is not None:
            raise EvidenceFailed(stage, error)
