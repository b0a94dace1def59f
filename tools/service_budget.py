"""The tool service's bound on request bodies held in memory at once (tools/service.py); the reward service
(graph/reward_service.py) uses it the same way.

Each request body is read whole before it waits for a worker slot, and it is kept until its work is done
(a ``.npy`` body is used as a zero-copy view). ``max_pending`` (64) requests of ``max_upload_mb`` (256 MiB)
each could hold 16 GiB. Decisions where the issue was silent:
- The bodies held at once are bounded by ``max_buffered_mb`` (default ``DEFAULT_MAX_BUFFERED_MB``, 2 GiB,
  or ``max_upload_mb`` when that is larger, so one body of the largest size always fits). A request whose
  body does not fit gets 503 "busy", like one over ``max_pending``: the client retries it with backoff, and
  it fits once earlier requests are done.
- A declared ``Content-Length`` is reserved before any byte is read (the client does not upload 256 MiB to be
  told it is busy); a body without one is counted as its chunks arrive. The reservation is released when the
  request's answer is ready.
- Only the raw bodies are counted: the decoded frames are bounded per request by ``max_decode_mb``, and
  a multipart upload's parsed copy by the body's own size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tools.service_frames import HTTPProblem

DEFAULT_MAX_BUFFERED_MB = 2048.0
"""Default bound (MiB) on the request bodies the tool service holds at once."""


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
    """Bytes of request bodies held at once (used from the event loop only: no lock)."""

    def __init__(self, limit: int) -> None:
        self.limit = int(limit)
        self.held = 0

    @contextmanager
    def reserve(self) -> Iterator[Callable[[int], None]]:
        """A ``take(n)`` that reserves ``n`` more bytes for this request, or raises 503 when they do not
        fit; everything taken is released when the block ends."""
        taken = 0

        def take(n: int) -> None:
            nonlocal taken
            if self.held + n > self.limit:
                raise HTTPProblem(503, f"busy: {self.held / 2**20:.1f} MiB of request bodies held, {n / 2**20:.1f} MiB "
                                       f"more would pass the limit of {self.limit / 2**20:g} MiB (max_buffered_mb)")
            self.held += n
            taken += n

        try:
            yield take
        finally:
            self.held -= taken
