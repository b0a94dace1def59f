"""Which runs want each shared pool job, so that a cancelled run's queued background work is cancelled too.

A run queues work it awaits only later (graph.frame_store `shared_job`): the surprise scoring and the extra
tools that quality starts, the speculative grid track, the encoding of observe's images. When the run is
cancelled (`ascore_videos` cancelled, a timeout around it, Ctrl-C in `score_video`), nobody awaits that work
any more, yet it stayed queued and ran: a cancelled GRPO group of 16 clips left 16 V-JEPA 2 scorings holding the
"later" slots (`graph.workers.LATER_SLOTS`) and the GPU ahead of the next group's work.

`want(job)` records the run of the enclosing `graph.workers.run_scope` as one that wants the job (every
`FrameStore` request for a shared job, started or reused, calls it); `abandon(run)` (the node wrapper and
`graph.api` call it when a run is cancelled) drops the run from its jobs' wanters and cancels each job that no
other run wants and that is still queued. A running job finishes (threads cannot be interrupted). A job wanted
outside any run scope (a direct `FrameStore` caller) is never cancelled here. A cancelled job in the shared-job
table is started afresh by the next request for it, as after `FrameStore.forget`.
"""

from __future__ import annotations

import threading
import weakref
from concurrent.futures import Future

from graph.workers import current_run

_PINNED = ""
"""The wanter recorded for requests made outside a run scope: never abandoned."""

_lock = threading.Lock()
_wanters: weakref.WeakKeyDictionary[Future, set[str]] = weakref.WeakKeyDictionary()
_jobs_of: dict[str, weakref.WeakSet[Future]] = {}
_PRUNE_EVERY = 1024
_added = 0


def want(job: Future, like: Future | None = None) -> Future:
    """Record the current run (`graph.workers.current_run`) as wanting `job`, and with `like` (a job `job`
    replaces: the same work queued again) the runs that wanted that one; returns `job`."""
    global _added
    run = current_run()
    with _lock:
        runs = {run or _PINNED} | (_wanters.get(like, set()) if like is not None else set())
        _wanters.setdefault(job, set()).update(runs)
        for r in runs - {_PINNED}:
            _jobs_of.setdefault(r, weakref.WeakSet()).add(job)
            _added += 1
            if _added % _PRUNE_EVERY == 0:  # runs whose jobs are all gone (the futures collected)
                for key in [k for k, jobs in _jobs_of.items() if not jobs]:
                    del _jobs_of[key]
    return job


def abandon(run: str) -> int:
    """Drop `run` (cancelled) from the wanters of its jobs and cancel those no one else wants that are still
    queued; returns how many were cancelled. An empty run key does nothing."""
    if not run:
        return 0
    with _lock:
        cancelled = 0
        for job in list(_jobs_of.pop(run, ())):  # cancelled under the lock: no run can want it meanwhile
            wanters = _wanters.get(job)
            if wanters is not None:
                wanters.discard(run)
                cancelled += not wanters and not job.done() and job.cancel()
    return cancelled
