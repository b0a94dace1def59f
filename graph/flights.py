"""Single flights: concurrent callers of one key share one computation and its outcome (the stage calls of
graph/backbone.py, through `graph.cache.StageCache.share`).

Decisions where the issue was silent (it asks for one backbone call per unique stage input):
- The first caller of a key on an event loop (the holder) computes; callers that arrive while it runs (the
  waiters) take its outcome, its value or its exception, as Go's `golang.org/x/sync/singleflight` does.
  Before, identical calls were serialised by a lock and a waiter read the output the holder had stored;
  when the holder faulted (a server down, replies that kept failing validation) nothing was stored, so every
  waiter asked the model again, one after the other, each with the whole retry schedule: N identical
  concurrent stage inputs against a dead server cost N times the calls and N times the wait. The holder has
  spent the retry policy on this input a moment ago; a waiter repeating it would only stampede the server.
- A fault is shared with the flight's waiters only, never remembered: a caller that comes after the flight
  has ended starts a new one (a fault is never cached, graph/cache.py).
- A holder that is cancelled (its run cancelled, a KeyboardInterrupt) has no outcome to share: its waiters
  do not inherit the cancellation; the first of them to wake becomes the holder and computes, the others
  wait for it. A waiter that is cancelled leaves the flight alone.
- Waiters of a failed flight raise `FlightFailed` carrying the holder's exception, so the caller can raise
  an exception object of its own (one object raised in many tasks collects all their tracebacks) and say
  that the fault was shared.
- Flights are per (event loop, key), like `graph.cache.KeyLocks`: a future belongs to its loop, and callers
  on different loops (threads) never meet. The map holds only flights in the air.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Hashable
from typing import TypeVar

T = TypeVar("T")


class FlightFailed(Exception):
    """Raised in a waiter whose flight's holder raised `error` (see the module docstring)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(f"a concurrent identical call failed: {type(error).__name__}: {error}")
        self.error = error


class Flights:
    """Single flights per (event loop, key); safe to share between threads (each with its own loop)."""

    def __init__(self) -> None:
        self._flights: dict[tuple[int, Hashable], asyncio.Future] = {}
        self._guard = threading.Lock()

    def __len__(self) -> int:
        with self._guard:
            return len(self._flights)

    async def run(self, key: Hashable, compute: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        """(value, shared): `compute()`'s value, computed here (shared False) or by the holder of the flight in
        the air for `key` (shared True; the same object, copy it before changing it). A waiter raises
        `FlightFailed` when the holder raised; the holder raises its own exception."""
        loop = asyncio.get_running_loop()
        slot = (id(loop), key)
        while True:
            with self._guard:
                flight = self._flights.get(slot)
                if flight is None:
                    flight = self._flights[slot] = loop.create_future()
                    break
            await asyncio.wait([flight])  # a cancelled waiter stops here; the flight goes on
            if flight.cancelled():  # the holder was cancelled: the first waiter to wake takes over
                continue
            error = flight.exception()
            if error is not None:
                raise FlightFailed(error) from error  # type: ignore[arg-type]  # set_exception took an Exception
            return flight.result(), True
        try:
            value = await compute()
        except Exception as exc:
            self._land(slot)
            flight.set_exception(exc)
            flight.exception()  # marked retrieved: no "exception was never retrieved" log when no one waited
            raise
        except BaseException:  # cancelled: nothing to share
            self._land(slot)
            flight.cancel()
            raise
        self._land(slot)
        flight.set_result(value)
        return value, False

    def _land(self, slot: tuple[int, Hashable]) -> None:
        """The flight at `slot` has ended: a caller from now on starts a new one."""
        with self._guard:
            del self._flights[slot]
