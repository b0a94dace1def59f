"""The worker process of `raa score-batch --processes N` (`graph.batch_procs` runs the parent and describes the pipe
protocol): `run_worker` is the process's target, `worker_main` the body that builds one agent, scores the items it is
sent and sends each row back.

Decisions where the issue was silent:
- Ctrl-C is the parent's: a worker does nothing on SIGINT (`run_worker`), and the parent, on its KeyboardInterrupt,
  terminates the workers and writes no row for a run in flight (`raa score-batch` then prints its closing lines and
  exits 130, as in one process). A Ctrl-C goes to the whole process group; a worker that ended on it by itself
  ("fatal: KeyboardInterrupt", exit code 1) before the parent had taken its own was buried as a worker death: its
  runs retried alone on a replacement worker, and on a second such death an ineligible row for a clip that was only
  interrupted (or `BatchError`, exit 2, when no worker was left). The handler is a function, not SIG_IGN, so a
  program a tool runs (exec'd: handlers go back to the default) still ends on the Ctrl-C as it would in one process.
  A worker starts with SIGINT ignored (`starting_worker`: the parent ignores it while it starts the process, and an
  ignored signal stays ignored across exec), so a Ctrl-C while its interpreter starts and imports also leaves it be:
  it ended there with a KeyboardInterrupt traceback, and when every worker did, the batch stopped with BatchError as
  if none could start. The cost: a Ctrl-C in the few milliseconds the parent takes to start a process is lost (press
  it again).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import Any

from graph.batch import build_batch_agent, clip_stamp, result_line, score_item
from graph.settings import BackboneSettings, TraceDurability


def run_worker(body: Callable[..., None], conn: Connection, settings: BackboneSettings, preset: str,
               durability: TraceDurability, draw: int = 0) -> None:
    """The target of a worker process: `body` (`worker_main`; tests give a stand-in) with SIGINT left to the parent
    (module docstring)."""
    signal.signal(signal.SIGINT, _parent_stops_the_batch)
    body(conn, settings, preset, durability, draw)


def _parent_stops_the_batch(signum: int, frame: Any) -> None:
    """SIGINT in a worker: nothing; the parent terminates the workers (module docstring)."""


@contextmanager
def starting_worker() -> Iterator[None]:
    """Around the start of a worker process (`multiprocessing.Process.start`, spawn): SIGINT ignored in this process,
    so the worker starts with it ignored until `run_worker` sets its handler (module docstring). Nothing where this
    process cannot set a handler (not its main thread) or its handler was not set from Python."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is None:
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def worker_main(conn: Connection, settings: BackboneSettings, preset: str, durability: TraceDurability,
                draw: int = 0) -> None:
    """The body of a worker process (`run_worker`): build the agent, score the items it is sent, send rows back."""
    try:
        asyncio.run(_serve(conn, settings, preset, durability, draw))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, then the worker exits
        send_quietly(conn, ("fatal", f"{type(exc).__name__}: {exc}"))
        raise SystemExit(1) from exc


def send_quietly(conn: Connection, message: tuple) -> None:
    """Send `message` over `conn`, nothing when the other end is gone."""
    try:
        conn.send(message)
    except OSError:  # the other end is gone; nothing left to report to
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
        clip = clip_stamp(item["path"])
        result = await score_item(agent, item, durability, settings.foreign_claim_max_age_s)
        send_quietly(conn, ("row", ticket, result_line(item, result, clip), result.status))

    async with open_async_saver(settings.traces_path) as saver:
        # the preset's tool models load before the worker says ready: one that cannot load (V-JEPA 2 or
        # CoTracker3 weights missing) stops the batch at start with the reason (BatchError, exit 2), as
        # `raa score-batch` in one process does, instead of every clip getting an ineligible row
        tools = loaded_toolbox(ToolSettings.from_env(), settings.agent_config(preset))
        agent = build_batch_agent(settings, preset, saver, default_chat_model(settings), tools, draw=draw)
        send_quietly(conn, ("ready", os.getpid()))
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
