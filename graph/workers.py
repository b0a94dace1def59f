"""Worker threads for the agent's blocking frame and tool work, with two priorities.

Decoding, JPEG encoding, LK tracking and the quality check run in OpenCV / PyAV / numpy code that
releases the GIL, so they leave the event loop free when they run in threads. `run_blocking` sends
such a call to a shared pool and awaits it. Jobs on a run's critical path (frames and images a model
call is waiting for, tracks the next inspect round needs) use priority "now"; work whose result is
needed only several model calls later (the world-model surprise, consumed by reflect) uses "later",
so when many runs share few cores the images a model call waits for are produced first.

Decisions where the issue was silent:
- One process-wide pool of `WORKERS` (8) threads, created on first use (not at import): enough to
  overlap decoder latency on small machines without oversubscribing the cores much; jobs are taken
  in priority order, FIFO within a priority, and at most `LATER_SLOTS` (4) "later" jobs run at a
  time (a "later" job starts only when no "now" job is queued), so half the threads always stay
  free for critical work. Four, not one: a remote surprise scorer (tools.client) is an HTTP call,
  and serialising those across concurrent runs would delay every run's reflect stage.
- The caller's contextvars are copied into the job (as `asyncio.to_thread` does).
- Idle threads are woken last-in first-out: a new job goes to the thread that finished most recently,
  so a run's consecutive jobs stay on one thread (warm caches, one malloc arena) instead of rotating
  through all eight. Rotating cost ~40% more CPU for sixteen clips decoded one after another.
- A job whose awaiting task was cancelled still runs to completion (threads cannot be interrupted);
  its result is dropped.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import heapq
import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Literal, TypeVar

Priority = Literal["now", "later"]
WORKERS = 8
LATER_SLOTS = 4
_RANK: dict[Priority, int] = {"now": 0, "later": 1}
T = TypeVar("T")


class PriorityPool:
    """A fixed set of daemon threads taking jobs from a priority heap; an idle thread is woken
    last-in first-out (see module docstring)."""

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self._heap: list[tuple[int, int, Future, Callable[[], Any]]] = []
        self._lock = threading.Lock()
        self._idle: list[threading.Event] = []  # one wake-up event per idle thread; the last idled on top
        self._seq = itertools.count()
        self._later_running = 0
        self._threads = [threading.Thread(target=self._work, name=f"raa-worker-{i}", daemon=True)
                         for i in range(workers)]
        for t in self._threads:
            t.start()

    def submit(self, fn: Callable[[], Any], priority: Priority = "now") -> Future:
        """Queue `fn()`; the returned Future gets its result or exception."""
        future: Future = Future()
        with self._lock:
            heapq.heappush(self._heap, (_RANK[priority], next(self._seq), future, fn))
            self._wake()
        return future

    def _wake(self) -> None:
        """Wake the most recently idled thread (caller holds the lock)."""
        if self._idle:
            self._idle.pop().set()

    def _take(self) -> tuple[int, Future, Callable[[], Any]] | None:
        """The next runnable job, or None (caller holds the lock)."""
        if not self._heap or (self._heap[0][0] > 0 and self._later_running >= LATER_SLOTS):
            return None
        rank, _, future, fn = heapq.heappop(self._heap)
        self._later_running += rank > 0
        if self._heap:  # more runnable work: pass it on instead of waiting for the next submit
            self._wake()
        return rank, future, fn

    def _work(self) -> None:
        wake = threading.Event()
        while True:
            with self._lock:
                job = self._take()
                if job is None:
                    wake.clear()
                    self._idle.append(wake)
            if job is None:
                wake.wait()
                continue
            rank, future, fn = job
            try:
                if future.set_running_or_notify_cancel():
                    try:
                        future.set_result(fn())
                    except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
                        future.set_exception(exc)
            finally:
                if rank > 0:  # this thread takes the next job itself on its next loop
                    with self._lock:
                        self._later_running -= 1


_POOL: PriorityPool | None = None
_POOL_LOCK = threading.Lock()


def pool() -> PriorityPool:
    """The process-wide pool (started on first use)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = PriorityPool(WORKERS)
        return _POOL


async def run_blocking(fn: Callable[..., T], /, *args: Any, priority: Priority = "now", **kwargs: Any) -> T:
    """Run `fn(*args, **kwargs)` in a worker thread and await its result (see module docstring)."""
    ctx = contextvars.copy_context()
    call = functools.partial(ctx.run, fn, *args, **kwargs)
    return await asyncio.wrap_future(pool().submit(call, priority))
