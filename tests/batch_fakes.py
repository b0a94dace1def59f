"""Stand-in batch workers speaking `graph.batch_procs`' pipe protocol (ready / row), for tests of the parent's
bookkeeping without a model server: only the worker body is replaced, the parent logic is the real one.

An item whose instruction starts with POISON kills its worker after 0.3 s (like a decoder segfault); one starting
with HANG is never answered (a native deadlock); every other item takes `DELAY_S` and is scored 1.0 with the
worker's pid as its run id."""

from __future__ import annotations

import os
import signal
import threading
import time

DELAY_S = 1.0


def fake_worker(conn, settings, preset, durability, draw=0) -> None:  # noqa: ANN001 - worker_main's signature
    from graph.batch import result_line
    from graph.schemas import RewardResult

    lock = threading.Lock()

    def one(ticket: int, item: dict) -> None:
        if item["instruction"].startswith("POISON"):
            time.sleep(0.3)
            os.kill(os.getpid(), signal.SIGKILL)
        if item["instruction"].startswith("HANG"):
            return
        time.sleep(DELAY_S)
        result = RewardResult(status="scored", reward=1.0, preset=preset, run_id=str(os.getpid()))
        with lock:
            conn.send(("row", ticket, result_line(item, result), result.status))

    conn.send(("ready", os.getpid()))
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message[0] != "item":
            return
        threading.Thread(target=one, args=(message[1], message[2]), daemon=True).start()
