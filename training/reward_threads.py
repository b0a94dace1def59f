"""The threads a trainer's sync reward calls run in, and the bound on those stuck in calls that timed out.

A reward call that times out (training/reward_runner.py, ``reward_timeout_s``) is abandoned, not stopped:
Python cannot kill a thread, so a sync reward (the callable itself, a sync part of a sum, the HTTP reward's
post) stuck in a call keeps its thread until the call returns by itself, and what it returns then is dropped.
An async reward awaiting on the loop is cancelled at its deadline instead (the agent's runs stop there).

:class:`RewardThreads` runs each sync call in a daemon thread of its own and remembers the call's deadline.
A thread still running past its deadline is *stuck*; once ``limit`` threads are, the runner refuses new
calls with an explicit reason (their clips ineligible) instead of starting more threads that may never end:
stuck threads never pile up past ``limit``, and calls resume as soon as one of them returns.

Decisions where the issue was silent: daemon threads, not a ``ThreadPoolExecutor`` (nor asyncio's default
executor): an executor's workers are joined when the interpreter exits, so one stuck thread kept a finished
or stopped run from exiting at all; a queue in front of a fixed pool would also have held healthy calls
behind stuck ones. The calls that are not stuck are not limited here (one per prompt group in flight, times
a sum's sync parts), as they were not with ``asyncio.to_thread``. Without a deadline (``reward_timeout_s:
none``) no thread is ever stuck: the runner waits as long as the reward takes.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

_scope: contextvars.ContextVar[tuple[RewardThreads, float | None] | None] = contextvars.ContextVar(
    "reward_threads", default=None)
"""The threads and deadline (``time.monotonic``) of the reward call running in this task, set by the runner."""


class RewardThreads:
    """Daemon threads for sync reward calls, with the count of those stuck past their call's deadline."""

    def __init__(self, limit: int) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"RewardThreads: limit must be an int >= 1, got {limit!r}")
        self.limit = limit
        """How many stuck threads refuse further calls (module docstring)."""
        self._lock = threading.Lock()
        self._deadlines: dict[Future[Any], float | None] = {}  # calls not yet returned

    def stuck(self) -> int:
        """Threads still running a call whose deadline has passed."""
        now = time.monotonic()
        with self._lock:
            return sum(1 for future, deadline in self._deadlines.items()
                       if deadline is not None and deadline <= now and future.running())

    def full(self) -> bool:
        """Whether ``limit`` threads are stuck: a new call is refused (module docstring)."""
        return self.stuck() >= self.limit

    def submit(self, deadline: float | None, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """``fn(*args, **kwargs)`` in a new daemon thread, in a copy of the caller's context (as
        ``asyncio.to_thread``); the future holds its result. A future cancelled before the thread starts
        the call never calls it."""
        future: Future[Any] = Future()
        with self._lock:
            self._deadlines[future] = deadline
        future.add_done_callback(self._forget)
        context = contextvars.copy_context()

        def work() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = context.run(fn, *args, **kwargs)
            except BaseException as exc:  # handed to the awaiting call, which decides
                future.set_exception(exc)
            else:
                future.set_result(result)

        threading.Thread(target=work, name="reward-call", daemon=True).start()
        return future

    def _forget(self, future: Future[Any]) -> None:
        with self._lock:
            self._deadlines.pop(future, None)

    async def within(self, deadline: float | None, call: Any) -> Any:
        """Await the coroutine ``call`` with :func:`in_thread` using these threads and ``deadline``."""
        token = _scope.set((self, deadline))
        try:
            return await call
        finally:
            _scope.reset(token)


async def in_thread(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` off the event loop: in the running reward call's threads with its deadline
    (:meth:`RewardThreads.within`), else in asyncio's default executor (``asyncio.to_thread``: a reward called
    outside a `training.reward_runner.RewardRunner`)."""
    scope = _scope.get()
    if scope is None:
        return await asyncio.to_thread(fn, *args, **kwargs)
    threads, deadline = scope
    return await asyncio.wrap_future(threads.submit(deadline, fn, *args, **kwargs))
