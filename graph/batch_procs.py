"""Batch scoring over worker processes (`raa score-batch --processes N`).

Why processes: through `ChatOpenAI` each model request costs ~20 ms of CPU on the process's event
loop (benchmarks/backbone_http.py), so one process scores at most ~6 clips per second however fast
the server answers; and a clip that crashes the decoder (a segfault inside FFmpeg) would take a
single-process batch down with every run in flight.

How: this process reads the manifest, owns the output file and hands items, one message each, to N
spawned workers over pipes. At most `concurrency` runs are in flight over all workers together (the
load on the model server is what `--concurrency` is about); a new item goes to the ready worker with
the fewest runs in flight. Each worker builds one agent exactly as the in-process batch does
(`graph.batch.build_batch_agent`, with the settings this process read at the edge, the chat model
`graph.backbone.default_chat_model`, default tools) and sends back each finished row; traces of all
workers go to the one trace database (SQLite in WAL mode, which serialises the writers).

Decisions where the issue was silent:
- Start method "spawn": the parent has live threads (worker pools, SQLite), which `fork` would copy
  in an undefined state. Workers are not daemonic (they may start processes of their own); a worker
  whose pipe to the parent closes (the parent was killed) cancels its runs in flight and exits, since
  their rows could no longer be written (their items stay for the resume). A worker needs a few
  seconds to import and build its agent; items go only to workers that said they are ready.
- A worker that dies (crash, signal, out-of-memory kill) loses the runs it had in flight: each of
  those items is tried once more on another worker (it may have died for a neighbour's clip); an
  item whose worker dies on its second attempt gets an ineligible row naming the exit status. A
  replacement worker is started while work remains, so one bad clip never stops the batch.
- A worker that fails before it is ready (bad trace path, import error, a preset's tool model that
  cannot load) is not replaced; when no
  worker is left, `BatchError` carries its message and the items not yet scored stay unwritten, so
  the batch resumes after the cause is fixed.
- Rows of items that could not be dispatched are never invented: every item ends as a row from a
  worker, an ineligible row with the reason, or unwritten (BatchError / interrupt) for the resume.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing as mp
import os
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from graph.batch import (
    RowWriter,
    build_batch_agent,
    result_line,
    score_item,
    write_bad_lines,
)
from graph.settings import BackboneSettings, TraceDurability

MAX_ATTEMPTS = 2
"""Tries of one item whose worker died while scoring it (the second death makes it ineligible)."""
STOP_TIMEOUT_S = 30.0
"""Seconds a worker may take to exit after the last item before it is terminated."""


class BatchError(RuntimeError):
    """The batch cannot go on (no worker process could start); unscored items stay unwritten."""


# ---------------------------------------------------------------------------------------------- worker
def worker_main(conn: Connection, settings: BackboneSettings, preset: str, durability: TraceDurability,
                draw: int = 0) -> None:
    """Entry point of a worker process: build the agent, score the items it is sent, send rows back."""
    try:
        asyncio.run(_serve(conn, settings, preset, durability, draw))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, then the worker exits
        _send(conn, ("fatal", f"{type(exc).__name__}: {exc}"))
        raise SystemExit(1) from exc


def _send(conn: Connection, message: tuple) -> None:
    try:
        conn.send(message)
    except OSError:  # the parent is gone; nothing left to report to
        pass


async def _serve(conn: Connection, settings: BackboneSettings, preset: str, durability: TraceDurability,
                 draw: int = 0) -> None:
    from graph.backbone import default_chat_model
    from graph.context import loaded_toolbox
    from graph.tracing import open_async_saver
    from tools.settings import ToolSettings

    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[tuple] = asyncio.Queue()

    def read() -> None:  # pipe -> event loop; a closed pipe means the parent is gone
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                message = ("gone",)
            loop.call_soon_threadsafe(inbox.put_nowait, message)
            if message[0] in ("stop", "gone"):
                return

    async def one(ticket: int, item: dict[str, Any]) -> None:
        result = await score_item(agent, item, durability)
        _send(conn, ("row", ticket, result_line(item, result), result.status))

    async with open_async_saver(settings.traces_path) as saver:
        # the preset's tool models load before the worker says ready: one that cannot load (V-JEPA 2 or
        # CoTracker3 weights missing) stops the batch at start with the reason (BatchError, exit 2), as
        # `raa score-batch` in one process does, instead of every clip getting an ineligible row
        tools = loaded_toolbox(ToolSettings.from_env(), settings.agent_config(preset))
        agent = build_batch_agent(settings, preset, saver, default_chat_model(settings), tools, draw=draw)
        _send(conn, ("ready", os.getpid()))
        threading.Thread(target=read, name="raa-batch-inbox", daemon=True).start()
        running: set[asyncio.Task] = set()
        while (message := await inbox.get())[0] == "item":
            task = asyncio.create_task(one(message[1], message[2]))
            running.add(task)
            task.add_done_callback(running.discard)
        if message[0] == "gone":  # nobody is left to write the rows: stop the runs instead of finishing them
            for task in running:
                task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)


# ---------------------------------------------------------------------------------------------- parent
@dataclass
class _Worker:
    process: Any
    conn: Connection
    ready: bool = False
    fatal: str = ""
    in_flight: dict[int, tuple[dict[str, Any], int]] = field(default_factory=dict)
    """ticket -> (item, attempt) of the items sent and not yet answered (a ticket per dispatch, so two
    manifest lines with the same key are two runs)."""


def exit_text(code: int | None) -> str:
    """Human wording of a process exit code (negative = killed by that signal)."""
    if code is None:
        return "no exit status"
    return f"signal {-code}" if code < 0 else f"exit code {code}"


def run_batch_processes(items: list[dict[str, Any]], writer: RowWriter, *, settings: BackboneSettings,
                        preset: str, processes: int, concurrency: int, durability: TraceDurability = "exit",
                        log: Callable[[str], None] | None = None, draw: int = 0) -> dict[str, int]:
    """Score `items` over `processes` worker processes with at most `concurrency` runs in flight in all;
    rows go to `writer` as they arrive; `log` gets one line per worker that died. Returns the writer's
    counts; raises BatchError when no worker can start (see module docstring)."""
    if processes < 1 or concurrency < 1:
        raise ValueError(f"processes and concurrency must be >= 1, got {processes} and {concurrency}")
    pending = deque((item, 1) for item in write_bad_lines(items, writer))  # (item, attempt)
    ctx = mp.get_context("spawn")
    workers: list[_Worker] = []
    spawns_left = processes + MAX_ATTEMPTS * len(pending)  # every death uses up an attempt of an item
    startup_errors: list[str] = []
    tickets = itertools.count()

    def spawn() -> None:
        nonlocal spawns_left
        parent_end, child_end = ctx.Pipe()
        # not daemonic: a worker may start processes of its own; it exits when the parent's pipe closes
        proc = ctx.Process(target=worker_main, args=(child_end, settings, preset, durability, draw),
                           name="raa-batch-worker")
        proc.start()
        child_end.close()  # so the parent sees EOF when the worker exits
        workers.append(_Worker(proc, parent_end))
        spawns_left -= 1

    def dispatch() -> None:
        ready = [w for w in workers if w.ready and w.process.is_alive()]
        while pending and ready and sum(len(w.in_flight) for w in workers) < concurrency:
            target = min(ready, key=lambda w: len(w.in_flight))
            item, attempt = pending.popleft()
            ticket = next(tickets)
            try:
                target.conn.send(("item", ticket, item))
            except OSError:  # it died just now; the item waits for another worker (bury() handles the death)
                pending.appendleft((item, attempt))
                ready.remove(target)
                continue
            target.in_flight[ticket] = (item, attempt)

    def receive(w: _Worker) -> None:
        while True:
            try:
                if not w.conn.poll():
                    return
                message = w.conn.recv()
            except (EOFError, OSError):
                return
            if message[0] == "ready":
                w.ready = True
            elif message[0] == "row":
                _, ticket, line, status = message
                if w.in_flight.pop(ticket, None) is not None:
                    writer.write(line, status)
            elif message[0] == "fatal":
                w.fatal = message[1]

    def bury(w: _Worker) -> None:
        from graph.api import ineligible_result

        workers.remove(w)
        w.conn.close()
        how = exit_text(w.process.exitcode)
        if not w.ready:
            startup_errors.append(w.fatal or f"worker process ended before it was ready ({how})")
        elif log is not None:
            retry = sum(attempt < MAX_ATTEMPTS for _, attempt in w.in_flight.values())
            log(f"batch worker {w.process.pid} died ({how}) with {len(w.in_flight)} run(s) in flight: "
                f"{retry} retried, {len(w.in_flight) - retry} ineligible")
        for item, attempt in w.in_flight.values():
            if attempt < MAX_ATTEMPTS:
                pending.appendleft((item, attempt + 1))
            else:
                reason = (f"batch: the worker process scoring this clip died ({how}"
                          f"{': ' + w.fatal if w.fatal else ''}) on each of {attempt} attempts")
                writer.write(result_line(item, ineligible_result(item["preset"], reason)), "ineligible")
        if w.ready and pending and spawns_left > 0:
            spawn()

    finished = False
    try:
        for _ in range(min(processes, len(pending))):
            spawn()
        while pending or any(w.in_flight for w in workers):
            if not workers:
                raise BatchError("no batch worker process could start: " + "; ".join(dict.fromkeys(startup_errors)))
            dispatch()
            wait([w.conn for w in workers] + [w.process.sentinel for w in workers], timeout=1.0)
            for w in list(workers):
                receive(w)
                if not w.process.is_alive():
                    receive(w)  # rows sent just before it exited
                    bury(w)
        finished = True
    finally:
        _stop(workers, graceful=finished)
    return writer.counts


def _stop(workers: list[_Worker], *, graceful: bool) -> None:
    """Ask every worker to exit (graceful: all runs are answered) or terminate it at once (an error or
    interrupt in this process: rows of runs still in flight could no longer be written)."""
    for w in workers:
        if graceful:
            _send(w.conn, ("stop",))
        else:
            w.process.terminate()
    for w in workers:
        w.process.join(STOP_TIMEOUT_S if graceful else 5)
        if w.process.is_alive():
            w.process.kill()
            w.process.join(5)
        w.conn.close()
