"""The frame store's table of shared pool jobs: one job per key, shared by every run that asks for it.

Work that several callers may ask for at once runs as one pool job per key (`FrameStore.shared_job`):
motion tracks per (video, frames, points), the surprise scoring and extra evidence a run's quality step
starts, and the encoding of the observe sample's images. The rules, where the issue was silent:
- a running or finished job is reused; a job still queued at priority "later" (a speculative prefetch)
  is cancelled and queued again at "now" when a caller at "now" needs it; a failed or cancelled job is
  started afresh;
- a job queued again is wanted by the runs that wanted the old one (`graph.job_owners`), so a cancelled
  run's clean-up does not cancel it under another run;
- the table keeps at most `_MAX_JOBS` finished jobs (the oldest finished leave first); a job in flight
  always stays, or a second caller would start it twice, and so does the job just started, even when it
  finished at once (trimmed, `start` raised KeyError for the job it had just handed out);
- in a forked child the table starts empty (`graph.frame_fork`): the parent's pool threads are not there.

The table has its own lock, separate from the frame store's: `FrameStore.forget` marks a clip's
versions as forgotten under the store's lock first, then drops (and cancels) its jobs here, so work
still running for the clip cannot put entries back either way.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from graph.job_owners import want
from graph.workers import Lane, Priority, submit

_MAX_JOBS = 256  # finished shared jobs kept (a 32x64-point track ~25 KB; an encoding job's is None)

Entry = tuple[Future, Priority]


class SharedJobs:
    """Pool jobs keyed by what they compute, each started once and shared (module docstring)."""

    def __init__(self) -> None:
        self._jobs: OrderedDict[Any, Entry] = OrderedDict()
        self._lock = threading.Lock()

    def after_fork(self) -> None:
        """In a forked child: a fresh lock and no jobs (the parent's threads do not exist here)."""
        self._lock = threading.Lock()
        self._jobs = OrderedDict()

    def start(self, key: Any, compute: Callable[[], Any], priority: Priority, lane: Lane) -> Entry:
        """The job for `key` (reused, promoted or started: module docstring) and the priority it was
        queued at. `compute` runs in a worker thread."""
        with self._lock:
            entry, replaced = self._jobs.get(key), None
            if entry is not None:  # wanted first: a cancelled run's `abandon` then leaves it be (graph.job_owners)
                job, queued_at = want(entry[0]), entry[1]
                stale = job.done() and (job.cancelled() or job.exception() is not None)
                if stale or (priority == "now" and queued_at == "later" and job.cancel()):
                    entry, replaced = None, job
            if entry is None:  # a job queued again is wanted by the runs that wanted the old one
                entry = (want(submit(compute, priority=priority, lane=lane), like=replaced), priority)
                self._jobs[key] = entry
                self._trim(key)
            self._jobs.move_to_end(key)
            return entry

    def _trim(self, keep: Any) -> None:
        """Drop the oldest finished jobs past `_MAX_JOBS`, never `keep` (the job just handed out: one that finished
        at once, even failed, was trimmed and `start` raised KeyError) nor one in flight (or it ran twice)."""
        done = [k for k, (j, _) in self._jobs.items() if k != keep and j.done()]
        for old in done[:max(len(self._jobs) - _MAX_JOBS, 0)]:
            del self._jobs[old]

    def get(self, key: Any) -> Future | None:
        """The job in the table for `key` (any state), or None; does not start one."""
        with self._lock:
            entry = self._jobs.get(key)
        return None if entry is None else entry[0]

    def drop(self, match: Callable[[Any], bool]) -> int:
        """Remove the jobs whose key `match`es, cancelling those still queued (a running one finishes
        unreferenced). Returns how many were removed."""
        with self._lock:
            keys = [k for k in self._jobs if match(k)]
            for k in keys:
                self._jobs.pop(k)[0].cancel()  # a speculative job still queued never starts
        return len(keys)

    def snapshot(self) -> list[tuple[Any, Entry]]:
        """The table's (key, (job, priority queued at)) pairs, oldest first (for diagnostics and tests)."""
        with self._lock:
            return list(self._jobs.items())
