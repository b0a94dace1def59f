"""Worker threads for the agent's blocking frame and tool work: two lanes, two priorities, oldest run first.

Decoding, JPEG encoding, LK tracking and the quality check run in OpenCV / PyAV / numpy code that
releases the GIL, so they leave the event loop free when they run in threads. `run_blocking` sends
such a call to a shared pool and awaits it; `submit` queues it and returns a Future (for work that
is started now and awaited later, like the speculative motion track).

- Lanes. "cpu" (the default): one thread per core (`cpu_workers()`, at least 2), so frame work of
  concurrent runs never oversubscribes the cores. "io": `IO_WORKERS` (8) threads for jobs that
  mostly wait on the network (tools served by the tool service, `tools.client`), so they never hold
  a core's thread while waiting. Tool jobs pick their lane from `graph.context.ToolProvider` (`tracker_lane`,
  `surprise_lane`: each tool's own).
- Priorities. "first": the frame work before a run's first model call (the quality probe: decode and
  statistics; the encoding of observe's images), which every later step of the run waits behind. Jobs a
  run is about to wait for later on (images for the next model call, tracks a tool call asked for) use
  "now"; work whose result is wanted only a model call or more later (the motion-track prefetch; the
  surprise scoring and extra tools, until assess) uses "later": it starts only when no "first" or "now"
  job is queued, at most `LATER_SLOTS` (4) at a time per lane, and a queued "later" job can be
  cancelled and re-queued at "now" by whoever needs it.
- Oldest run first. Within a priority, jobs run in the order their runs started (`run_scope`, entered
  by every stage node with the run's thread id), then in submission order; jobs outside a run scope
  are ordered by submission. When many runs share few cores, the first runs get their images and
  tracks first and move on to their (long) model calls, so the runs spread out over time instead of
  all waiting on the same burst of frame work at once.

Decisions where the issue was silent:
- The pools are created on first use (not at import). Measured on 2 cores with 16 concurrent runs
  (benchmarks/agent_concurrency.py, interleaved repeats on a noisy VM): 8 CPU threads instead of 2
  cost ~35% more CPU per run (cache and GIL contention) and ~0.1-0.15 more wall over critical path;
  plain submission order instead of oldest run first gave a mean of 1.36 instead of 1.26. Keeping a thread
  free of "later" jobs (at most workers - 1 of them: one on 2 cores) starved the surprise scoring and track
  prefetch the runs wait for before reflect: 1.70-1.73 against 1.46-1.51 (three interleaved pairs, Dec 2026).
- "first" above "now": with oldest run first alone, the tool jobs of runs already past their first model
  call (crops, tracks, the surprise scoring hurried at assess) ran ahead of the younger runs' probes, so
  the last run of a burst reached its first model call only after them; every run's later steps wait
  on that call. 16 concurrent runs on the loaded 2-core VM (load 6-8, three interleaved pairs of three):
  the last observe call started at 1.9-2.4 s instead of 1.8-4.6 s, and the worker CPU spent before it
  fell from 80-90% to 55-60% of the runs' worker CPU (the rest waits until every probe is done).
- The caller's contextvars are copied into the job (as `asyncio.to_thread` does).
- Idle threads are woken last-in first-out: a new job goes to the thread that finished most recently,
  so a run's consecutive jobs stay on one thread (warm caches, one malloc arena). Rotating through
  every thread cost ~40% more CPU for sixteen clips decoded one after another.
- A job whose awaiting task was cancelled still runs to completion (threads cannot be interrupted);
  its result is dropped. A cancelled run's shared jobs still queued that no other run wants are cancelled
  (`graph.job_owners`, which reads the run key `run_scope` sets: `current_run`).
- At interpreter exit (an `atexit` hook registered with the first pool) every pool is shut down:
  queued jobs are cancelled and running "cpu" jobs are waited for (at most `EXIT_WAIT_S`, 60 s; a
  Ctrl-C during a long CPU job such as CoTracker3 on CPU waits for it); "io" jobs, which may be
  waiting on the network for minutes, are not waited for. The threads are daemons, and a daemon
  thread still inside OpenCV when the interpreter finalizes is torn down mid-C++ ("terminate called
  without an active exception", exit status 134): a speculative motion track that nobody awaited
  aborted ~40% of short `motion`-preset scripts after they had printed their result. A job submitted
  after that (a later exit hook, a daemon thread still running) is refused with a RuntimeError, which
  its stage records as a fault: it started fresh pools, whose threads no hook shut down, so they could
  be torn down mid-OpenCV again. (A pool taken before the shutdown refuses its jobs as well.)
- A job that raises SystemExit or KeyboardInterrupt (`sys.exit` in a custom tool, argparse in a research model's
  loader reading the trainer's own command line) fails with `JobExit`, an ordinary exception that its stage records
  as a fault: in a worker thread neither can stop the process (Python ends only that thread), and handed on as they
  were, they passed every stage's handler and left the event loop, so `ascore_videos` lost the whole group. So does
  one that raises asyncio.CancelledError itself (a tool's own `asyncio.run` whose task was cancelled): it is no
  cancellation of the task awaiting the job, which took it for one and ended cancelled (the group lost again).
- The way back from sync code to the coroutines is `graph.bridge.run_sync` (one loop per process).
- A child forked after the pools started (`multiprocessing`'s default start method on Linux, DataLoader
  workers) starts its own pools on first use: the parent's threads do not exist there, so a job queued on
  the parent's pools waited forever. The fork hook is registered with the first pool, not at import. A
  child forked while its parent runs its exit hooks is a process of its own: its pools start as usual.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import functools
import heapq
import itertools
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any, Literal, TypeVar, get_args

Priority = Literal["first", "now", "later"]
Lane = Literal["cpu", "io"]
IO_WORKERS = 8
LATER_SLOTS = 4
_RANK: dict[Priority, int] = {"first": 0, "now": 1, "later": 2}
_LATER = _RANK["later"]
T = TypeVar("T")


def usable_cores() -> int:
    """Cores this process may run on: its CPU affinity on Linux (e.g. under `taskset` or a
    cpuset-limited container), else the machine's count; at least 1."""
    cores = len(os.sched_getaffinity(0)) if sys.platform.startswith("linux") else os.cpu_count()
    return max(1, cores or 1)


def cpu_workers() -> int:
    """Threads of the "cpu" lane: one per usable core, at least 2."""
    return max(2, usable_cores())


class PriorityPool:
    """A fixed set of daemon threads taking jobs from a priority heap; an idle thread is woken
    last-in first-out (see module docstring)."""

    def __init__(self, workers: int, name: str = "raa-worker") -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.workers = workers
        self._heap: list[tuple[int, int, int, Future, Callable[[], Any]]] = []
        self._lock = threading.Lock()
        self._idle: list[threading.Event] = []  # one wake-up event per idle thread; the last idled on top
        self._seq = itertools.count()
        self._later_running = 0
        self._closed = False
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
                         for i in range(workers)]
        for t in self._threads:
            t.start()

    def submit(self, fn: Callable[[], Any], priority: Priority = "now", order: int | None = None) -> Future:
        """Queue `fn()`; the returned Future gets its result or exception. Within a priority, jobs
        run by `order` (lower first), then in submission order; no order = submission order."""
        check_priority(priority)
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the worker pool is shut down (interpreter exit)")
            seq = next(self._seq)
            heapq.heappush(self._heap, (_RANK[priority], seq if order is None else order, seq, future, fn))
            self._wake()
        return future

    def shutdown(self, wait_s: float | None = None) -> None:
        """Cancel the queued jobs, let the running ones finish (waiting at most `wait_s` seconds in all;
        None = as long as they take) and stop the threads; later submits raise."""
        with self._lock:
            self._closed = True
            queued, self._heap = self._heap, []
            idle, self._idle = self._idle, []
        for *_, future, _fn in queued:
            future.cancel()
        for wake in idle:
            wake.set()
        deadline = None if wait_s is None else time.monotonic() + wait_s
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def _wake(self) -> None:
        """Wake the most recently idled thread (caller holds the lock)."""
        if self._idle:
            self._idle.pop().set()

    def _take(self) -> tuple[int, Future, Callable[[], Any]] | None:
        """The next runnable job, or None (caller holds the lock)."""
        if not self._heap or (self._heap[0][0] == _LATER and self._later_running >= LATER_SLOTS):
            return None
        rank, _, _, future, fn = heapq.heappop(self._heap)
        self._later_running += rank == _LATER
        if self._heap:  # more runnable work: pass it on instead of waiting for the next submit
            self._wake()
        return rank, future, fn

    def _work(self) -> None:
        wake = threading.Event()
        while True:
            with self._lock:
                if self._closed:
                    return
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
                    except (SystemExit, KeyboardInterrupt, asyncio.CancelledError) as exc:  # module docstring
                        future.set_exception(job_exit(exc))
                    except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
                        future.set_exception(exc)
            finally:
                if rank == _LATER:  # this thread takes the next job itself on its next loop
                    with self._lock:
                        self._later_running -= 1


class JobExit(RuntimeError):
    """A worker job raised SystemExit, KeyboardInterrupt or asyncio.CancelledError (module docstring)."""


def job_exit(exc: BaseException) -> JobExit:
    """The ordinary exception a worker job's SystemExit, KeyboardInterrupt or CancelledError `exc` is handed on as."""
    error = JobExit(f"a worker job raised {type(exc).__name__}({', '.join(map(repr, exc.args))}), which from a worker "
                    "thread neither stops the process nor cancels the task awaiting the job")
    error.__cause__ = exc
    return error


_POOLS: dict[Lane, PriorityPool] = {}
_POOL_LOCK = threading.Lock()
_FORK_HOOKED = False
_EXITED = False  # the exit hook has shut the pools down: no new ones (module docstring)


def check_lane(lane: object, what: str = "worker lane") -> None:
    """ValueError naming `what` unless `lane` is one of the `Lane`s (a pool of another name would start, and
    interpreter exit would fail on it)."""
    _check_choice(lane, get_args(Lane), what)


def check_priority(priority: object) -> None:
    """ValueError naming `priority` and the allowed ones unless it is one of the `Priority`s (it was a bare
    KeyError of the rank table)."""
    _check_choice(priority, get_args(Priority), "job priority")


def _check_choice(value: object, allowed: tuple[str, ...], what: str) -> None:
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"unknown {what} {value!r}: must be one of {allowed} (graph.workers)")


def pool(lane: Lane = "cpu") -> PriorityPool:
    """The process-wide pool of `lane` (started on first use; a forked child starts its own)."""
    global _FORK_HOOKED
    with _POOL_LOCK:
        if _EXITED:
            raise RuntimeError("the worker pools are shut down: the interpreter is exiting")
        if lane not in _POOLS:
            check_lane(lane)  # here, where every lane's pool is made (`EXIT_WAIT_S` too)
            if not _POOLS:
                atexit.register(_shutdown_at_exit)
            if not _FORK_HOOKED:
                os.register_at_fork(after_in_child=_forget_pools)
                _FORK_HOOKED = True
            size = cpu_workers() if lane == "cpu" else IO_WORKERS
            _POOLS[lane] = PriorityPool(size, name=f"raa-{lane}")
        return _POOLS[lane]


def _forget_pools() -> None:
    """In a forked child: drop the parent's pools, whose threads do not exist here (a job queued on them
    would wait forever), and the locks a parent thread may have held at the fork. Runs before any other
    thread of the child starts."""
    global _POOL_LOCK, _ORDERS_LOCK, _EXITED
    _POOL_LOCK, _ORDERS_LOCK = threading.Lock(), threading.Lock()
    _POOLS.clear()
    _EXITED = False


EXIT_WAIT_S: dict[Lane, float] = {"cpu": 60.0, "io": 0.0}
"""How long interpreter exit waits for running jobs per lane: "cpu" jobs run native code (OpenCV,
PyAV, torch) that must not be torn down mid-call; "io" jobs wait on the network (up to the tool
client's timeout) and are left to the interpreter, like any daemon thread."""


def _shutdown_at_exit() -> None:
    """The `atexit` hook: shut the pools down and refuse new ones (module docstring)."""
    global _EXITED
    with _POOL_LOCK:
        _EXITED = True
    shutdown_pools()


def shutdown_pools() -> None:
    """Shut the process-wide pools down (at interpreter exit through `_shutdown_at_exit`; see module
    docstring). Called directly, a later `submit` starts fresh pools."""
    with _POOL_LOCK:
        pools = list(_POOLS.items())
        _POOLS.clear()
    for lane, p in pools:
        p.shutdown(EXIT_WAIT_S[lane])


_RUN_ORDER: contextvars.ContextVar[int | None] = contextvars.ContextVar("raa_run_order", default=None)
_RUN_KEY: contextvars.ContextVar[str] = contextvars.ContextVar("raa_run_key", default="")
_ORDERS: dict[str, int] = {}
_ORDERS_LOCK = threading.Lock()
_ORDER_SEQ = itertools.count()
_MAX_ORDERS = 4096


@contextlib.contextmanager
def run_scope(run_key: str) -> Iterator[None]:
    """Jobs submitted inside carry the age of run `run_key` (the order in which run keys were first
    seen), so the oldest run's jobs go first within a priority. An empty key adds no order."""
    if not run_key:
        yield
        return
    with _ORDERS_LOCK:
        order = _ORDERS.get(run_key)
        if order is None:
            order = _ORDERS[run_key] = next(_ORDER_SEQ)
            if len(_ORDERS) > _MAX_ORDERS:  # forget the oldest key (dicts keep insertion order)
                del _ORDERS[next(iter(_ORDERS))]
    token, key_token = _RUN_ORDER.set(order), _RUN_KEY.set(run_key)
    try:
        yield
    finally:
        _RUN_KEY.reset(key_token)
        _RUN_ORDER.reset(token)


def current_run() -> str:
    """The run key of the enclosing `run_scope` ("" outside one)."""
    return _RUN_KEY.get()


def submit(fn: Callable[..., T], /, *args: Any, priority: Priority = "now", lane: Lane = "cpu",
           **kwargs: Any) -> Future:
    """Queue `fn(*args, **kwargs)` with the caller's contextvars and run age; the Future is
    thread-safe (awaitable from any event loop through `asyncio.wrap_future`) and cancellable while
    the job is still queued."""
    order = _RUN_ORDER.get()
    if order is None:
        with _ORDERS_LOCK:
            order = next(_ORDER_SEQ)
    ctx = contextvars.copy_context()
    return pool(lane).submit(functools.partial(ctx.run, fn, *args, **kwargs), priority, order)


def _read_outcome(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()


class JobCancelled(RuntimeError):
    """A shared job was cancelled by someone else (e.g. `FrameStore.forget` dropped its clip while it was queued)."""


async def await_job(job: Future) -> Any:
    """Await a pool job that other callers may share (`FrameStore.shared_job`). Cancelling this caller does not
    cancel the job for the others (`asyncio.shield`; a bare `asyncio.wrap_future` cancels a queued job when its
    awaiting task is cancelled, and every other run waiting on it then got CancelledError, which no stage
    catches). A job cancelled elsewhere raises JobCancelled, an ordinary exception the stage records as a fault.
    The shielded future's outcome is always read, so a job that fails after its waiter was cancelled logs no
    "Future exception was never retrieved"."""
    inner = asyncio.wrap_future(job)
    inner.add_done_callback(_read_outcome)
    try:
        return await asyncio.shield(inner)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if job.cancelled() and (task is None or task.cancelling() == 0):
            raise JobCancelled("a shared job was cancelled (its clip was dropped from the frame cache)") from None
        raise


async def run_blocking(fn: Callable[..., T], /, *args: Any, priority: Priority = "now", lane: Lane = "cpu",
                       **kwargs: Any) -> T:
    """Run `fn(*args, **kwargs)` in a worker thread and await its result (see module docstring)."""
    return await asyncio.wrap_future(submit(fn, *args, priority=priority, lane=lane, **kwargs))
