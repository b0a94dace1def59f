"""From sync code to the agent's coroutines: one event loop per process for every sync call.

`run_sync` is how the sync entry points (`score_video`, the compiled graph's `invoke` and its nodes,
`Backbone.structured`, training's reward calls and held-out evaluation) run a coroutine. They all run
it on one long-lived loop, `sync_loop()`: a daemon thread ("raa-sync-loop") started on first use, never
at import.

Why one loop and not `asyncio.run` per call: HTTP clients pool keep-alive connections, and a pooled
connection belongs to the event loop that opened it. langchain-openai even shares one async httpx
client between all `ChatOpenAI` objects with the same base URL, process-wide. With a fresh loop per
call, every other `score_video` against a keep-alive server (vLLM, any hosted API) failed at its first
model call with ``RuntimeError: Event loop is closed`` or ``... is bound to a different event loop``
and the clip was ineligible; the sync `invoke`, which ran each node on its own loop, lost nearly every
run. (Known upstream: langchain-ai/langchain#35783.) Code that manages its own loops (`asyncio.run`
around `ascore_videos`, several times in one script; `await` in a notebook between sync calls) can
still meet a stale connection; the backbone retries that error like a dropped connection
(graph/backbone.py). The failed attempt may already have reached the server, so such a retry can cost
one duplicate request; one loop (the sync API, or one `asyncio.run` for the whole job) avoids it.

Decisions where the issue was silent:
- The caller's contextvars go with the coroutine (its task runs in a copy of the caller's context),
  as they did with a fresh loop.
- Several threads may call `run_sync` at once: their coroutines run concurrently on the one loop.
  The calling thread blocks until its coroutine is done; from a thread that runs a loop itself (a
  Jupyter cell, an async framework calling sync code) that blocks that loop meanwhile, as before.
- A call made on the bridge loop's own thread cannot wait for that loop; it runs on a fresh loop in a
  helper thread instead (the old behaviour, kept for that case only). While such a call blocks the
  bridge thread, every other call runs that way too: a call from the helper (a second level of sync code
  inside it) or from a thread it waits for would otherwise wait for the blocked loop, forever.
- An exception in the waiting thread (Ctrl-C) cancels the coroutine before it propagates.
- After a fork the child starts its own loop (the parent's thread does not exist there), with a fresh lock
  and no stall (a parent thread may have held the lock at the fork, so the child's first call waited
  forever; a parent call blocking the bridge thread left every child call on a fresh loop of its own). The
  fork hook is registered when the first loop starts, not at import (as graph/workers.py's for its pools).
- A coroutine that ends cancelled raises `concurrent.futures.CancelledError` in the caller (as before: an
  Exception, which the sync callers' handlers turn into a fault or an ineligible result) with the reason it
  was cancelled with (`task.cancel(msg)`, `raise CancelledError(msg)`) as its message: `Future.cancel()` made
  it a bare one, so a reward's ineligible batch said only "raised CancelledError: ", the reason gone. A call
  from the bridge thread (a fresh loop) raises the same: `asyncio.run` let asyncio's own out, a BaseException.
- A coroutine that raises SystemExit or KeyboardInterrupt (`sys.exit` in a callback) raises it in the
  caller, as `asyncio.run` did. asyncio lets those two out of the loop: unhandled, they stopped the bridge
  thread before the caller was told, and the caller waited forever.
- The same two raised by a task nobody here started (one a reward or tool creates itself with
  `create_task`) still come out of `run_forever`; the bridge thread reports them on stderr and runs the
  loop on (`_serve`: the loop is intact, and in a thread that is not the main one they could never stop the
  process anyway), so the other calls and the task's awaiter, which gets the exception, carry on.
- A loop whose thread ends anyway (the loop itself broke, or it was stopped) tells the calls waiting on it:
  `run_sync` raises a RuntimeError saying so, and `when_loop_ends` lets other waiters (training's
  RewardRunner) end theirs; the next `sync_loop()` starts a fresh loop.
- At interpreter exit (an atexit handler registered with the first loop, `_wind_down`) the loop's pending
  tasks are cancelled and awaited and the loop stopped, and exit waits for its thread, each at most
  `_EXIT_WAIT_S` seconds. Left running, the daemon thread was still inside the loop while Python finalized;
  Python ends a thread that wakes then wherever it is (pthread_exit), which aborts the process if that is
  inside C++ code ("terminate called without an active exception", exit -6 after a training run that had
  finished and printed its result). A loop blocked by sync code on its thread cannot be stopped: exit goes on
  after the wait, as before. A call made after that (an atexit handler registered before the first loop runs
  after this one) runs on a fresh loop in the calling thread (`asyncio.run`), not on a new bridge thread.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import os
import sys
import threading
import weakref
from collections.abc import Callable, Coroutine
from concurrent.futures import CancelledError, Future, InvalidStateError, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_bridge: tuple[int, asyncio.AbstractEventLoop, threading.Thread] | None = None
_stalled = 0  # calls made on the bridge thread, blocking it now (see the module docstring)
_wound_down = False  # `_wind_down` ran (interpreter exit): later calls run aside, no new bridge thread
_hooked = False
_EXIT_WAIT_S = 5.0  # at exit: how long pending tasks may take to end once cancelled, and the thread to end


class _Life:
    """Whether a bridge loop's thread has ended (``ended``: why) and who waits to be told (`when_loop_ends`)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ended: str | None = None
        self.watchers: dict[object, Callable[[str], None]] = {}


_lives: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Life] = weakref.WeakKeyDictionary()


def sync_loop() -> asyncio.AbstractEventLoop:
    """The process's bridge loop (started on first use; see the module docstring)."""
    global _bridge, _hooked
    with _lock:
        if not _hooked:
            os.register_at_fork(after_in_child=_forget_bridge)
            atexit.register(_wind_down)
            _hooked = True
        if _bridge is None or _bridge[0] != os.getpid() or not _bridge[2].is_alive() or _bridge[1].is_closed() \
                or _lives[_bridge[1]].ended is not None:  # ending: its watchers are told before the thread ends
            loop = asyncio.new_event_loop()
            _lives[loop] = life = _Life()
            thread = threading.Thread(target=_serve, args=(loop, life), name="raa-sync-loop", daemon=True)
            thread.start()
            _bridge = (os.getpid(), loop, thread)
        return _bridge[1]


def _serve(loop: asyncio.AbstractEventLoop, life: _Life) -> None:
    """The bridge thread: run ``loop``, on through a SystemExit / KeyboardInterrupt a task let out (module
    docstring); when the thread ends all the same, tell `when_loop_ends`'s watchers why."""
    reason = "it was stopped"
    try:
        while True:
            try:
                loop.run_forever()
                return
            except (SystemExit, KeyboardInterrupt) as exc:  # a task's, the loop intact: not a reason to stop
                print(f"raa-sync-loop: a task raised {type(exc).__name__}({exc}); the event loop runs on",
                      file=sys.stderr, flush=True)
    except BaseException as exc:
        reason = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        with life.lock:
            life.ended = f"the bridge event loop's thread ended ({reason})"
            watchers = list(life.watchers.values())
            life.watchers.clear()
        for watcher in watchers:
            watcher(life.ended)


def when_loop_ends(loop: asyncio.AbstractEventLoop, watcher: Callable[[str], None]) -> Callable[[], None]:
    """Call ``watcher(reason)`` once the thread of the bridge loop ``loop`` (a `sync_loop()`) has ended, at
    once if it has; returns the function that unregisters it (call it when the wait is over). ValueError
    for a loop `sync_loop` did not start."""
    life = _lives.get(loop)
    if life is None:
        raise ValueError(f"{loop!r} is not a bridge loop (graph.bridge.sync_loop)")
    key = object()
    with life.lock:
        if life.ended is None:
            life.watchers[key] = watcher
            return lambda: _unwatch(life, key)
    watcher(life.ended)
    return lambda: None


def _unwatch(life: _Life, key: object) -> None:
    with life.lock:
        life.watchers.pop(key, None)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to completion on the bridge loop and return its result (or raise its exception)."""
    context = contextvars.copy_context()
    if _wound_down:  # interpreter exit: a fresh loop in this thread, no new bridge thread (module docstring)
        return context.run(_run_fresh, coro)
    loop = sync_loop()
    if threading.current_thread() is _bridge_thread() or _stalled:  # the bridge loop cannot run it now
        return _run_aside(coro, context)
    done: Future[T] = Future()
    started: list[asyncio.Task[T]] = []

    def start() -> None:  # on the loop, in the caller's context: the task keeps a copy of it
        if done.cancelled():
            coro.close()
            return
        task = loop.create_task(_contained(coro))
        started.append(task)
        task.add_done_callback(lambda t: _settle(t, done))

    loop.call_soon_threadsafe(start, context=context)
    unwatch = when_loop_ends(loop, lambda why: _fail(done, RuntimeError(f"run_sync: {why} before the call ended")))
    try:
        return done.result()
    except BaseException:
        if not done.done():  # the caller gave up (Ctrl-C): stop the coroutine as well
            done.cancel()
            loop.call_soon_threadsafe(lambda: [t.cancel() for t in started])
        raise
    finally:
        unwatch()


def _fail(done: Future[Any], exc: BaseException) -> None:
    """``done`` ends with ``exc`` unless it has ended already (a race with `_settle` or the caller's cancel)."""
    try:
        done.set_exception(exc)
    except InvalidStateError:
        pass


class _Escaped(Exception):
    """Carries a SystemExit / KeyboardInterrupt out of a bridge task (see the module docstring)."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(repr(exc))
        self.exc = exc


async def _contained(coro: Coroutine[Any, Any, T]) -> T:
    """`coro`, with SystemExit / KeyboardInterrupt raised as `_Escaped`: asyncio re-raises those two out of
    `run_forever`, which would end the bridge thread and leave the caller's future unsettled."""
    try:
        return await coro
    except (SystemExit, KeyboardInterrupt) as exc:
        raise _Escaped(exc) from None


def _run_aside(coro: Coroutine[Any, Any, T], context: contextvars.Context) -> T:
    """`coro` on a fresh loop in a helper thread; on the bridge thread, counted as a stall meanwhile."""
    global _stalled
    blocking = threading.current_thread() is _bridge_thread()
    if blocking:
        with _lock:
            _stalled += 1
    try:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="raa-run-sync") as helper:
            return helper.submit(context.run, _run_fresh, coro).result()
    finally:
        if blocking:
            with _lock:
                _stalled -= 1


def _run_fresh(coro: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(coro)`, a cancellation raised as the bridge loop's path raises it (`caller_cancelled`):
    `asyncio.run` let the asyncio.CancelledError out, a BaseException the sync callers' handlers miss."""
    try:
        return asyncio.run(coro)
    except asyncio.CancelledError as exc:
        raise caller_cancelled(exc) from exc


def _wind_down() -> None:
    """At exit: cancel the bridge loop's tasks, stop it and wait for its thread (module docstring)."""
    global _wound_down
    with _lock:
        bridge, _wound_down = _bridge, True
    if bridge is None or bridge[0] != os.getpid() or not bridge[2].is_alive():
        return
    _, loop, thread = bridge

    async def finish() -> None:
        tasks = asyncio.all_tasks() - {asyncio.current_task()}
        for task in tasks:
            task.cancel("the interpreter is exiting")
        if tasks:
            await asyncio.wait(tasks, timeout=_EXIT_WAIT_S)
        loop.stop()

    try:
        asyncio.run_coroutine_threadsafe(finish(), loop)
    except RuntimeError:  # the loop was closed meanwhile
        return
    thread.join(2 * _EXIT_WAIT_S)


def _forget_bridge() -> None:
    """In a forked child: a fresh lock (a parent thread may have held it at the fork) and no stall (the
    parent's blocked bridge thread does not exist here); the child's first call starts its own loop."""
    global _lock, _stalled, _bridge
    _lock, _stalled, _bridge = threading.Lock(), 0, None


def cancelled_error(task: asyncio.Task[Any]) -> CancelledError:
    """The caller's error for a cancelled `task`: a `concurrent.futures.CancelledError` carrying the reason
    the task was cancelled with (`task.cancel(msg)`, or a `CancelledError(msg)` raised in it), chained to it."""
    try:
        task.result()
    except asyncio.CancelledError as exc:
        return caller_cancelled(exc)
    raise ValueError(f"{task!r} is not cancelled")


def caller_cancelled(exc: asyncio.CancelledError) -> CancelledError:
    """`exc` as the sync caller's `concurrent.futures.CancelledError`: its reason kept, chained to it."""
    error = CancelledError(*exc.args)
    error.__cause__ = exc
    return error


def _bridge_thread() -> threading.Thread | None:
    return None if _bridge is None else _bridge[2]


def _settle(task: asyncio.Task[T], done: Future[T]) -> None:
    if done.done():  # cancelled by the caller
        return
    try:
        if task.cancelled():  # its reason kept (module docstring)
            done.set_exception(cancelled_error(task))
        elif (exc := task.exception()) is not None:
            done.set_exception(exc.exc if isinstance(exc, _Escaped) else exc)
        else:
            done.set_result(task.result())
    except InvalidStateError:  # the caller cancelled it meanwhile
        pass
