"""The agent's SQLite files (trace checkpoints, stage cache): a file that cannot be used is a
`StoreError` naming it, raised where the file is opened, before any run starts.

`connect_wal` opens a database in WAL mode for several processes at once: the ranks of a training run
with the agent as reward, or `score-batch --processes N` workers, open the same trace database and stage
cache together. Turning a new file to WAL (and creating its tables) takes SQLite's exclusive lock, and
a process that loses that race gets SQLITE_BUSY ("database is locked") at once: SQLite returns it
without waiting when waiting could deadlock, so the connection's busy timeout does not help. One of
two training ranks stopped at start that way about one launch in five. The setup is retried (with
jitter) for up to `OPEN_WAIT_S`; a lock held longer is still the StoreError below.

Decision where the issues were silent: a trace database or stage cache that is not a SQLite file,
sits under a path that is not a folder, or cannot be created is a usage error of the command (the CLI
prints the message and exits 2), not a traceback and not an ineligible run per clip: no run could
record its trace or reuse a stage output there, and the fix is the same for all of them.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

OPEN_WAIT_S = 30.0
"""How long `connect_wal` keeps retrying a database another process is setting up at the same time."""


class StoreError(RuntimeError):
    """A trace database or stage cache that cannot be created or opened."""


@contextmanager
def store_errors(path: str | Path, what: str, setting: str) -> Iterator[None]:
    """Turn SQLite and file-system errors raised while opening `path` into a `StoreError` that names
    the file (`what`: "trace database" / "stage cache") and the setting that chooses it."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        raise StoreError(f"{what} {path} cannot be used ({type(exc).__name__}: {exc}); move or delete "
                         f"it, or choose another path ({setting})") from exc


def ensure_parent(path: str | Path) -> None:
    """Create the folder of `path` (nothing for SQLite's ":memory:")."""
    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)


def connect_wal(path: str | Path, *, isolation_level: str | None = "") -> sqlite3.Connection:
    """A connection to `path` in WAL mode (":memory:" stays in memory), the switch retried while another
    process holds the lock it needs (`retry_locked`). `isolation_level`: as `sqlite3.connect` ("" = its
    default; None = autocommit)."""
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=isolation_level, timeout=5.0)

    def wal() -> None:
        if str(path) != ":memory:":  # WAL: a commit appends to the log instead of an fsync per write
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")

    try:
        retry_locked(conn, wal)
    except sqlite3.Error:
        conn.close()
        raise
    return conn


def retry_locked(conn: sqlite3.Connection, step: Callable[[], None], wait_s: float = OPEN_WAIT_S) -> None:
    """Run `step` (setting up `conn`'s database: WAL, tables), again after a short random pause while it
    fails with "database is locked" / "busy", for up to `wait_s` (see the module docstring)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            step()
            return
        except sqlite3.OperationalError as exc:
            if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() > deadline:
                raise
            if conn.in_transaction:
                conn.rollback()
            time.sleep(0.02 + random.random() * 0.08)
