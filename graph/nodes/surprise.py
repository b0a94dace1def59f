"""surprise node (WMReward on): V-JEPA 2 prediction surprise, once per clip (paper Sec. 3.2).

Only reflect shows the surprise (its most surprising windows), so the scoring runs beside the rest
of the run instead of holding it up: the quality step starts it in a worker thread as soon as the
clip is known to be usable (`start_surprise`), and this node, wired just before reflect, awaits that
job and records the result. The surprise values never enter the reward formula. A scorer that fails
to load or run raises ToolFault (ineligible).

Decisions where the issue was silent:
- Where it runs. The node used to run beside observe and contract, and assess joined on it, so a
  slow scorer (V-JEPA 2 on CPU, a busy GPU, a long or 720p clip) delayed every model call after
  observe. LangGraph finishes a superstep only when all its nodes have, so a branch cannot simply be
  left running; the work is a shared pool job instead (`FrameStore.shared_job`), started by quality
  and awaited here. The node's trace step
  says how long the scoring itself took; its duration is only the wait. A run resumed after its
  quality step (no job started in this process) scores here. A scoring failure makes the run
  ineligible as before; once it is known, assess or the next inspect round stops the run before its
  model call (graph.nodes.background), but a failure that comes late (a long scoring job) ends the
  run only here, after those calls. Long-lived callers load the scorer at start
  (`graph.context.preload_tools`), which catches the common failure (weights missing) before any run.
- One scoring per clip version (its file identity, see graph.frame_store), frame count and short
  side per FrameStore, like the motion tracks: runs of the same clip that share a FrameStore (the
  presets of `raa eval reward`, which share one with one set of tools; a clip scored again by the same
  agent) share the scores; a failed job is started afresh by the next run. V-JEPA 2's output depends
  only on those inputs and the scorer, which the key holds too (`ToolProvider.surprise_id`: V-JEPA 2's model,
  dtype, device and top_k, the tool service, an injected object): agents with other surprise settings sharing
  one FrameStore took each other's scores. Finished scores
  are also kept in the FrameStore's byte-bounded cache of derived artefacts (a few KB each), since
  the table of shared jobs keeps only the last 256 jobs (about 3 per run): a 100-clip evaluation
  reached a clip's second preset long after its job had left the table. A failed scoring is not
  kept. Presets without WMReward never look at the clip's job (graph.nodes.background).
- Awaited with `graph.workers.await_job`: a run that is cancelled while waiting does not cancel the
  job for the other runs that share it.
- Priority: the quality step queues the job at "later" and assess, the run's next stage, moves it to "now"
  (`hurry_surprise`) if it is still queued, as the surprise node does. At "now" from the start, every
  usable clip's scoring ran before the next clip's decoding and encoding (oldest run first, see
  graph.workers), so with many runs on few cores the last runs' first model call came later by the
  scoring time of all the runs before them (agent_concurrency on 2 cores: ~12 ms a clip, about 0.1 s
  for the 16th run), although reflect needs the scores only four or more model calls later. Left at
  "later" until reflect, it could be starved by concurrent runs' frame work; from assess on it has
  the time of those model calls. A scorer of the tool service runs in the "io" lane (`ToolProvider.surprise_lane`).
- Clips longer than 512 frames are scored on their first 512 frames (windows need consecutive
  frames) and a note records it. The scorer gets frames whose short side is at most
  `ToolProvider.surprise_short_side` (448 by default: V-JEPA 2 brings it to 292 or 438 before its
  crop anyway), decoded straight to that size: 512 frames of a 1080p clip took 3.2 GB at full size
  (twice that while stacking), ~0.5 GB now. With the tool service (`RemoteSurpriseScorer`) the node
  uploads the encoded clip and the service decodes it the same way: the frames themselves were
  hundreds of MB per clip for long clips, over the service's default 256 MiB upload limit.
- The scorer's answer is checked (`tools.surprise.evidence_problem`): another type, evidence over other
  frames, a window past them, or a NaN / infinite surprise is ToolFault("surprise", "run"). A NaN was
  shown to the model as "nan" and recorded; a non-SurpriseEvidence ended as an internal AttributeError.
"""

from __future__ import annotations

import functools
import time
from concurrent.futures import Future
from typing import Any, Literal, overload

from graph.context import RunContext
from graph.nodes.common import Step, brief, count, frames_total
from graph.state import AgentState
from graph.workers import Priority, await_job
from tools.errors import ToolFault, run_clip_tool, run_tool
from tools.surprise import evidence_problem

MAX_SURPRISE_FRAMES = 512


def _score(ctx: RunContext, video: str, used: int, key: tuple) -> tuple[Any, float]:
    """Load the scorer (lazily), decode the frames and score them: one worker-thread job. Returns
    (SurpriseEvidence, seconds it took), also kept in the frame cache under `key`."""
    from tools.client import RemoteSurpriseScorer

    t0 = time.perf_counter()
    scorer = ctx.tools.surprise()
    short_side = ctx.tools.surprise_short_side
    if isinstance(scorer, RemoteSurpriseScorer):  # the service decodes the clip: upload the file, not the frames
        evidence = run_clip_tool("surprise", scorer.score_file, video, frames=used, short_side=short_side)
    else:
        evidence = run_tool("surprise", scorer.score, ctx.frames.scaled_frames(video, range(used), short_side))
    if (problem := evidence_problem(evidence, used)) is not None:  # an injected scorer's bug: never evidence
        raise ToolFault("surprise", "run", problem)
    out = evidence, time.perf_counter() - t0
    windows = len(evidence.windows)
    ctx.frames.put_extra(key, out, size=1024 + 256 * windows)
    return out


@overload
def _job(ctx: RunContext, video: str, frames: int, *, start: Literal[True],
         priority: Priority = "now") -> Future: ...
@overload
def _job(ctx: RunContext, video: str, frames: int, *, start: bool, priority: Priority = "now") -> Future | None: ...
def _job(ctx: RunContext, video: str, frames: int, *, start: bool, priority: Priority = "now") -> Future | None:
    """The clip's scoring job: the one already started (`start` False: None when there is none), or
    started now at `priority` (`start` True; a failed one is started afresh, and one still queued at
    "later" is queued again at "now" when `priority` is "now")."""
    used = min(frames, MAX_SURPRISE_FRAMES)
    key = ("surprise", ctx.frames.current(video), used, ctx.tools.surprise_short_side,
           ctx.tools.surprise_id)  # which scorer ran (module docstring)
    if (kept := ctx.frames.get_extra(key)) is not None:  # scored before (the job may have left the job table)
        done: Future = Future()
        done.set_result(kept)
        return done
    if not start:
        return ctx.frames.started_job(key)
    return ctx.frames.shared_job(key, functools.partial(_score, ctx, video, used, key), priority,
                                 ctx.tools.surprise_lane)


def start_surprise(ctx: RunContext, video: str, frames: int) -> None:
    """Start scoring the clip (`frames` frames long) in a worker thread, unless a job for it is running or
    has succeeded; the surprise node awaits it. Called by the quality step once the clip is usable (see
    module docstring). It is queued at priority "later" until `hurry_surprise`."""
    _job(ctx, video, frames, start=True, priority="later")


def hurry_surprise(ctx: RunContext, video: str, frames: int) -> Future | None:
    """The clip's started scoring job, moved to priority "now" if it is still queued at "later" (a job
    that is running or done is left as it is, a failed one included: its failure is the run's)."""
    job = _job(ctx, video, frames, start=False)
    if job is not None and not job.done():
        job = _job(ctx, video, frames, start=True)
    return job


def started_surprise(ctx: RunContext, video: str, frames: int) -> Future | None:
    """The clip's scoring job if one was started (running or done), else None."""
    return _job(ctx, video, frames, start=False)


async def surprise(state: AgentState, ctx: RunContext, step: Step) -> dict[str, Any]:
    n = frames_total(state)
    used = min(n, MAX_SURPRISE_FRAMES)
    job = hurry_surprise(ctx, state["video"], n) or _job(ctx, state["video"], n, start=True)
    evidence, seconds = await await_job(job)
    top = ", ".join(f"{w.start}-{w.end}:{w.surprise:.3f}" for w in evidence.top[:3])
    step.decision = (f"{evidence.status}; {count(len(evidence.windows), 'window')}; top {top or 'none'}; "
                     f"scored in {seconds:.2f} s")
    step.tool_summaries = [brief(evidence.text(), 500)]
    step.frames = list(range(used))  # the frames the scorer was given (the trace's "frames used")
    notes = [f"surprise scored on the first {used} of {n} frames"] if used < n else []
    return {"surprise": evidence.model_dump(mode="json"), "notes": notes}
