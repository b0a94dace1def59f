"""The tool service's bound on request bodies held in memory at once (tools/service.py); the reward service
(graph/reward_service.py) uses it the same way.

Each request body is read whole before it waits for a worker slot, and it is kept until its work is done
(a ``.npy`` body is used as a zero-copy view). ``max_pending`` (64) requests of ``max_upload_mb`` (256 MiB)
each could hold 16 GiB. Decisions where the issue was silent:
- The bodies held at once are bounded by ``max_buffered_mb`` (default ``DEFAULT_MAX_BUFFERED_MB``, 2 GiB,
  or ``max_upload_mb`` when that is larger, so one body of the largest size always fits).
- A declared ``Content-Length`` is reserved before any byte is read (the client does not upload 256 MiB to be
  told it is busy). A body that does not fit waits in line for room, first come first served (a later,
  smaller body does not pass an earlier one, so a large body is not starved), up to ``busy_wait_s``
  (``--busy-wait-s``: finite, at most a day like ``--body-timeout-s``); only then is it a 503 "busy" naming
  the limit, which the client retries with backoff.
  An immediate 503 used to be the answer: the clients retry for seconds (3 attempts, 1 s backoff doubling)
  while a reward request holds its body for minutes, so "busy" became an ineligible batch, lost training
  signal. Defaults: ``DEFAULT_REWARD_BUSY_WAIT_S`` (300 s) for the reward service, whose clients wait minutes
  for an answer anyway (the trainer's ``timeout_s`` is 600 s), and ``DEFAULT_TOOL_BUSY_WAIT_S`` (60 s) for the
  tool service, whose requests take seconds and whose client times out after 300 s. ``busy_wait_s = 0``
  answers 503 at once. The wait holds no body bytes (the server does not read the body: its flow control
  pauses the upload), and the 503 is sent only after the wait, so a client's timeout must exceed it.
- A client that disconnects while its request waits gives up its place (499, never read) as soon as the
  server can tell: it watches the connection by reading at most ``PEEK_BYTES`` (64 KiB) of the body, kept for
  the request and not counted (a server does not notice a closed connection whose unread upload it has
  paused; such a waiter leaves when its wait ends or, granted room, when reading its body fails at once).
- A body without a declared length is counted as its chunks arrive, and a chunk that does not fit is a 503
  at once (it does not wait: requests holding half-read bodies while waiting for each other could never end).
  The reservation is released when the request's answer is ready, and the next in line that fits gets it.
- Every busy 503 (a body that found no room, and the tool service's ``max_pending`` overflow, which does not
  wait: a line of requests waiting for a place in the line would have no bound) carries ``Retry-After:
  BUSY_RETRY_AFTER_S`` (5 s), which the clients wait before their next attempt (tools/http_retry.py). It was
  a bare 503, retried on the client's own backoff: the tool client's three attempts spanned ~1.5 s (0.5 s
  doubling), so a burst past ``max_pending`` became tool faults, ineligible clips. The service cannot know
  when room frees; 5 s spreads a client's attempts over a burst (the waiting itself is ``busy_wait_s``).
- Only the raw bodies are counted: the decoded frames are bounded per request by ``max_decode_mb``, and
  a multipart upload's parsed copy replaces its raw body, which is dropped before the copy is read back
  (tools/service_multipart.py), so it stays within the body's own size.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

from tools.service_frames import HTTPProblem

DEFAULT_MAX_BUFFERED_MB = 2048.0
"""Default bound (MiB) on the request bodies the tool service holds at once."""

DEFAULT_TOOL_BUSY_WAIT_S = 60.0
"""Default wait (s) of a tool-service request for room for its body before its 503 (module docstring)."""

DEFAULT_REWARD_BUSY_WAIT_S = 300.0
"""Default wait (s) of a reward-service request for room for its body before its 503 (module docstring)."""

DEFAULT_BODY_TIMEOUT_S = 300.0
"""Default deadline (s) for a request body to arrive once its room is granted (tools/service_http.py)."""

BUSY_RETRY_AFTER_S = 5
"""The ``Retry-After`` (s) of a busy 503 (module docstring)."""

PEEK_BYTES = 64 * 1024
"""At most this much of a waiting request's body is read to notice its client disconnecting."""


def busy(detail: str) -> HTTPProblem:
    """A 503 "busy" answer saying when to try again (``Retry-After: BUSY_RETRY_AFTER_S``, module docstring)."""
    return HTTPProblem(503, detail, headers={"Retry-After": str(BUSY_RETRY_AFTER_S)})


def buffered_limit_bytes(max_buffered_mb: float | None, max_upload_bytes: int,
                         upload_option: str = "max_upload_mb") -> int:
    """The bound in bytes: ``max_buffered_mb`` (None: the default, or ``max_upload_bytes`` when larger);
    ValueError when it is below ``max_upload_bytes`` (a body of the allowed size could never be accepted),
    naming the per-body limit as ``upload_option`` (the reward service's is ``max_body_mb``)."""
    if max_buffered_mb is None:
        return max(int(DEFAULT_MAX_BUFFERED_MB * 2**20), max_upload_bytes)
    limit = int(max_buffered_mb * 2**20)
    if limit < max_upload_bytes:
        raise ValueError(f"max_buffered_mb ({max_buffered_mb:g}) must be at least {upload_option} "
                         f"({max_upload_bytes / 2**20:g}): a body of the largest allowed size would never fit")
    return limit


class BodyBudget:
    """Bytes of request bodies held at once, and the requests waiting (FIFO) for room (used from the event
    loop only: no lock). ``wait_s``: how long a declared body waits for room before its 503."""

    def __init__(self, limit: int, wait_s: float = 0.0) -> None:
        if not 0 <= wait_s < float("inf"):  # NaN and infinity too: a wait that never ends
            raise ValueError(f"busy_wait_s must be >= 0 and finite, got {wait_s!r}")
        self.limit = int(limit)
        self.wait_s = float(wait_s)
        self.held = 0
        self._queue: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def waiting(self) -> int:
        """Requests waiting for room."""
        return len(self._queue)

    def _busy(self, n: int, waited: str = "") -> HTTPProblem:
        return busy(f"busy: {self.held / 2**20:.1f} MiB of request bodies held, {n / 2**20:.1f} MiB "
                                f"more would pass the limit of {self.limit / 2**20:g} MiB (max_buffered_mb){waited}")

    def _grant(self) -> None:
        """Give room to the waiters at the head of the line while theirs fits (FIFO: a later, smaller body
        does not pass an earlier one)."""
        while self._queue and self.held + self._queue[0][0] <= self.limit:
            n, granted = self._queue.popleft()
            if not granted.done():
                self.held += n
                granted.set_result(None)

    def _release(self, n: int) -> None:
        self.held -= n
        self._grant()

    @contextmanager
    def reserve(self) -> Iterator[Reservation]:
        """A `Reservation` for one request; everything it took is released when the block ends."""
        reservation = Reservation(self)
        try:
            yield reservation
        finally:
            self._release(reservation.taken)


class Reservation:
    """One request's share of a `BodyBudget`."""

    def __init__(self, budget: BodyBudget) -> None:
        self.budget = budget
        self.taken = 0

    def take(self, n: int) -> None:
        """Reserve ``n`` more bytes at once (body chunks past the declared length), or raise 503."""
        budget = self.budget
        if budget.held + n > budget.limit:
            raise budget._busy(n)
        budget.held += n
        self.taken += n

    async def wait_take(self, n: int, gone: Coroutine[Any, Any, bool] | None = None) -> None:
        """Reserve ``n`` bytes (a declared body), waiting in line up to ``budget.wait_s`` for room; 503 when
        the wait ends without it, 499 when ``gone`` (a watch that returns True when the client disconnected,
        False when it can no longer tell) says the client left first. Either way the place in line is given up."""
        budget = self.budget
        if n > budget.limit or (not budget._queue and budget.held + n <= budget.limit):
            if gone is not None:
                gone.close()  # not needed: it never ran
            if n > budget.limit:  # never fits (buffered_limit_bytes keeps the limit >= the per-body limit)
                raise budget._busy(n)
            budget.held += n
            self.taken += n
            return
        watch = None if gone is None else asyncio.ensure_future(gone)
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        budget._queue.append((n, granted))
        left = asyncio.get_running_loop().time() + budget.wait_s
        try:
            while not granted.done():
                remaining = left - asyncio.get_running_loop().time()
                if remaining <= 0:
                    break
                waits: set[asyncio.Future[Any]] = {granted} if watch is None else {granted, watch}
                await asyncio.wait(waits, timeout=remaining,
                                   return_when=asyncio.FIRST_COMPLETED)
                if watch is not None and watch.done() and not granted.done():
                    if not watch.cancelled() and watch.exception() is None and watch.result():
                        raise HTTPProblem(499, "the client disconnected while its body waited for room; request skipped")
                    watch = None  # it can no longer tell: wait for room alone
        finally:
            if watch is not None:
                watch.cancel()
            if granted.done() and not granted.cancelled():
                self.taken += n  # granted (even if this wait was cancelled): released with the reservation
            else:
                granted.cancel()
                budget._queue = deque(w for w in budget._queue if w[1] is not granted)
                budget._grant()  # the next in line may fit now
        if not granted.done() or granted.cancelled():
            raise budget._busy(n, f"; waited {budget.wait_s:g} s in line (busy_wait_s)")


async def watch_disconnect(receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
                           early: list[MutableMapping[str, Any]]) -> bool:
    """True when the client disconnects; False once the body ended or ``PEEK_BYTES`` of it were read (the
    server can then no longer tell, module docstring). The ASGI messages read are appended to ``early``
    for the request to use before the rest of its body."""
    size = 0
    while size < PEEK_BYTES:
        message = await receive()
        if message.get("type") == "http.disconnect":
            return True
        early.append(message)  # no await since receive(): a cancelled watch loses no message
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            return False
    return False


async def body_chunks(early: list[MutableMapping[str, Any]], stream: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The body's chunks: those in ``early`` (read by `watch_disconnect`), then ``stream``'s unless they ended it."""
    for message in early:
        if message.get("body"):
            yield message["body"]
        if not message.get("more_body", False):
            return
    async for chunk in stream:
        yield chunk
