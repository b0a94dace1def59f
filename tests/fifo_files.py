"""A FIFO where a reader expects a regular file, and a call that must not block on one: opening a FIFO for reading
waits for a writer without limit, so a test of a reader that still opens it would hang, not fail."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

WAIT_S = 10.0


def make_fifo(path: Path) -> None:
    """A FIFO (named pipe) at `path`."""
    os.mkfifo(path)


def call_unblocked(fn: Callable[[], Any], fifo: Path) -> Any:
    """`fn()`'s value, or the exception it raised, re-raised here; AssertionError when it is still waiting after
    `WAIT_S` (a reader blocked opening `fifo`), after opening and closing the FIFO's writing end so that reader ends."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(WAIT_S)
    if thread.is_alive():
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # the blocked reader sees an empty file and ends
        except OSError:
            pass
        thread.join(WAIT_S)
        raise AssertionError(f"still waiting after {WAIT_S:.0f} s: the call blocked reading the FIFO {fifo}")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")
