"""The pieces of a fork scenario (tests/test_fork_safety.py, tests/test_frame_store_fork.py): a scenario runs in a
fresh interpreter, sets up the parent's state (`held_by_another_thread`: a lock held at the fork), then forks a
child (`forked_child`) and checks what it got."""

from __future__ import annotations

import multiprocessing
import sys
import threading
from collections.abc import Callable
from typing import Any

QUEUE_WAIT_S = 5.0
"""Seconds to wait for the child's result once it has exited."""


def forked_child(in_child: Callable[[Any], None], *, join_s: float,
                 after_join: Callable[[], None] = lambda: None) -> tuple[int, Any]:
    """Run ``in_child(queue)`` in a child forked from this process; (its exit code, what it put on the queue).
    ``after_join`` runs once the child has exited or ``join_s`` seconds have passed (a scenario releases what the
    parent held there). A child still running then ends the scenario ("the forked child hung"); a child that hung,
    or a failure here, is killed: no child outlives the scenario."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=in_child, args=(queue,))
    proc.start()
    try:
        proc.join(join_s)
        after_join()
        if proc.exitcode is None:
            sys.exit("the forked child hung")
        got = queue.get(timeout=QUEUE_WAIT_S)
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join()
    return proc.exitcode, got


def held_by_another_thread(lock: Any, release: threading.Event) -> None:
    """Return once a daemon thread holds ``lock`` (it keeps it until ``release`` is set): a fork now copies the
    lock held, by a thread that does not exist in the child."""
    taken = threading.Event()

    def holder() -> None:
        with lock:
            taken.set()
            release.wait()

    threading.Thread(target=holder, daemon=True).start()
    taken.wait()
