"""A writer blocked opening a FIFO's writing end (``cat > rows.jsonl`` on a path another tool made a FIFO) waits for a
reader. `tools.file_kinds.read_file` refused a FIFO put at its path after its stat only once it had opened it (without
blocking): that open released the writer, which then wrote into a pipe nobody read and failed with a broken pipe. On
Linux the path is looked at through an O_PATH handle, which opens neither end of a FIFO; a regular file is opened for
reading through it (/proc/self/fd), so the path is never opened by name a second time."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tools.file_kinds import read_bytes

BLOCKED_S = 10.0
"""How long the writer is given to reach its blocked open (it is there in milliseconds)."""
_OPEN = os.open
"""The real `os.open`, which the writer and the test's own reader use while the test patches it."""
RELEASED_S = 2.0
"""How long a writer the reader released has to finish its write (a woken thread does in milliseconds)."""


def _blocked_writer(fifo: Path) -> tuple[threading.Thread, dict[str, Any]]:
    """A thread that opens `fifo`'s writing end (blocking until a reader opens the other) and writes a byte; what came
    of it lands in the dict ("wrote", or the error). Returned once the thread waits in the kernel for a reader."""
    outcome: dict[str, Any] = {}

    def write() -> None:
        try:
            fd = _OPEN(fifo, os.O_WRONLY)
            try:
                os.write(fd, b"x")
            finally:
                os.close(fd)
            outcome["result"] = "wrote"
        except OSError as exc:
            outcome["result"] = exc

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    wchan = Path(f"/proc/self/task/{thread.native_id}/wchan")
    deadline = time.monotonic() + BLOCKED_S
    while (where := _read(wchan)) != "wait_for_partner":
        if where is None or time.monotonic() > deadline:  # "0" while it runs
            _release(fifo, thread)
            pytest.skip(f"cannot see the writer wait for a reader here (wchan: {where!r})")
        time.sleep(0.001)
    return thread, outcome


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _release(fifo: Path, thread: threading.Thread) -> bytes:
    """Open `fifo`'s reading end (the writer, if still blocked, writes into it), read what the writer wrote."""
    fd = _OPEN(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        thread.join(BLOCKED_S)
        try:
            return os.read(fd, 16)
        except BlockingIOError:
            return b""
    finally:
        os.close(fd)


def test_a_fifo_put_there_before_the_open_leaves_its_blocked_writer_waiting(tmp_path, monkeypatch):
    """The path is a regular file when the reader first looks; a FIFO with a writer blocked on it is put there just
    before the reader opens the path (the swap injected into `os.open`). The FIFO is refused and the writer keeps
    waiting: its write reaches the reader that opens the FIFO next, not a broken pipe."""
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b"{}\n")
    writers: list[tuple[threading.Thread, dict[str, Any]]] = []

    def swapped_first(target: Any, *args: Any, **kwargs: Any) -> int:
        if os.fspath(target) == str(path) and not writers:
            path.unlink()
            os.mkfifo(path)
            writers.append(_blocked_writer(path))
        return _OPEN(target, *args, **kwargs)

    monkeypatch.setattr(os, "open", swapped_first)
    with pytest.raises(OSError, match=rf"not a regular file: a FIFO: '{path}'"):
        read_bytes(path)
    monkeypatch.undo()
    [(thread, outcome)] = writers
    thread.join(RELEASED_S)
    assert outcome == {}, "the reader's open released the blocked writer"
    assert _release(path, thread) == b"x"
    assert outcome == {"result": "wrote"}
