"""Releases of run-id claims this process has started and not finished (`graph.run_claims`).

A run that ended with an error, was cancelled or closed early releases its claim in a daemon thread; a claim
cancelled while it was written is released once the write is done; a run's release at its end goes on when the
run is cancelled (a sync one interrupted, Ctrl-C) there. Each is listed here while it runs, so that a claim of the
same id by this process waits for it (`join_releases`): a retry or resume right after was refused as "already
running" in its own process.
Each is listed with an event it sets once done, not with its thread: a thread listed before it started could
not be joined (RuntimeError).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

Release = Callable[[str, str], None]
"""Drops this process's claim of (file, run id) (`graph.run_claims.release_quietly`)."""


class Claiming:
    """A claim being written in a worker thread: whether it took the claim, set once done."""

    def __init__(self) -> None:
        self.taken = False
        self.done = threading.Event()


_LATER: list[tuple[str, str, threading.Event, Claiming | None]] = []
"""(file, run id, set once done, a cancelled claim's write or None) of the releases that may still run."""
_LATER_LOCK = threading.Lock()


def pending(file: str, run_id: str, claiming: Claiming | None) -> threading.Event:
    """List a release of `run_id` about to start: the event it sets once done (`release_after`)."""
    released = threading.Event()
    with _LATER_LOCK:
        _LATER[:] = [later for later in _LATER if not later[2].is_set()]
        _LATER.append((file, run_id, released, claiming))
    return released


def release_after(release: Release, file: str, run_id: str, claiming: Claiming | None,
                  released: threading.Event) -> None:
    """`release` the claim (a `claiming` one once its write is done, if it took it), then set `released`."""
    try:
        if claiming is not None:
            claiming.done.wait()
            if not claiming.taken:  # refused (another run holds the id) or failed: nothing of ours to drop
                return
        release(file, run_id)
    finally:
        released.set()


def join_releases(timeout: float | None = None, of: tuple[str, str] | None = None,
                  but: Claiming | None = None) -> None:
    """Wait (each at most `timeout` seconds; None: until done) for the pending releases (`of`: only those of this
    (file, run id); `but`: not that of this claim being written)."""
    with _LATER_LOCK:
        events = [released for file, run_id, released, claiming in _LATER
                  if (of is None or (file, run_id) == of) and (but is None or claiming is not but)]
    for released in events:
        released.wait(timeout)
