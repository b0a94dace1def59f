"""The parent's reads of the worker pipes of `raa score-batch --processes N` (`graph.batch_procs` runs the batch and
describes the protocol): `receive` what one worker has sent so far, and `drain` every worker as the batch stops (a
Ctrl-C, a row that cannot be written). Split from graph.batch_procs by concern."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

from graph.batch_output import OutputWriteError, RowWriter

if TYPE_CHECKING:
    from graph.batch_procs import _Worker as Worker

DRAIN_S = 2.0
"""Seconds at most, on a Ctrl-C, to read the rows the workers had already sent before they are terminated."""


def drain(workers: list[Worker], writer: RowWriter) -> None:
    """On a Ctrl-C or a row that could not be written: `receive` from every worker for `DRAIN_S` at most, but none
    whose read the Ctrl-C interrupted (``torn``: read on from the middle of a message, a body taken for a length blocks
    for bytes that never come). A row that cannot be written meanwhile (a full disk) does not end the drain: the rows
    after it are read, their usage counted (`RowWriter.write` appends nothing after a failed append), then its
    `OutputWriteError` is raised."""
    deadline = time.monotonic() + DRAIN_S
    failed: OutputWriteError | None = None
    for w in workers:
        while not w.torn:
            try:
                receive(w, writer, until=deadline)
                break
            except OutputWriteError as exc:  # the first failure alone: the writer raises no other
                failed = exc
    if failed is not None:
        raise failed


def receive(w: Worker, writer: RowWriter, until: float = math.inf) -> None:
    """Read what `w` has sent so far, without waiting for more (until the monotonic clock reaches `until`: a worker
    that keeps sending cannot hold the caller); its rows of runs in flight go to `writer`."""
    while time.monotonic() < until:
        try:
            if w.closed_at is not None or not w.conn.poll():
                return
            w.torn = True  # until the message is read whole
            message = w.conn.recv()
            w.torn = False
        except (EOFError, OSError):
            w.closed_at = time.monotonic()
            return
        if message[0] == "ready":
            w.ready = True
        elif message[0] == "row":
            _, ticket, line, status = message
            if w.in_flight.pop(ticket, None) is not None:
                writer.write(line, status)
        elif message[0] == "fatal":
            w.fatal = message[1]
