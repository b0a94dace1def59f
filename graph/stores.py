"""The agent's SQLite files (trace checkpoints, stage cache): a file that cannot be used is a
`StoreError` naming it, raised where the file is opened, before any run starts.

`connect_wal` opens a database in WAL mode for several processes at once: the ranks of a training run
with the agent as reward, or `score-batch --processes N` workers, open the same trace database and stage
cache together. Turning a new file to WAL (and creating its tables) takes SQLite's exclusive lock, and
a process that loses that race gets SQLITE_BUSY ("database is locked") at once: SQLite returns it
without waiting when waiting could deadlock, so the connection's busy timeout does not help. One of
two training ranks stopped at start that way about one launch in five. The setup is retried (with
jitter) for up to `OPEN_WAIT_S` (`retry_locked`; `aretry_locked` for the async trace saver that `raa
score` and the `score-batch` workers open); a lock held longer is still the StoreError below.

Decision where the issues were silent: a trace database or stage cache that is not a SQLite file,
sits under a path that is not a folder, or cannot be created is a usage error of the command (the CLI
prints the message and exits 2), not a traceback and not an ineligible run per clip: no run could
record its trace or reuse a stage output there, and the fix is the same for all of them. Another program's
SQLite file (tables, none of the store's) is refused before anything is written to it (`connect_wal` checks
before it switches the journal mode) and its connection closed: it was switched to WAL for good, with -wal /
-shm files left beside it, before the refusal. A file another process holds locked past the wait is a
StoreError that says so (`locked`): the advice for a broken file (move or delete it; check it may be read) sent
users of a busy trace database after their traces or their permissions.
"""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
import time
import warnings
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

OPEN_WAIT_S = 30.0
"""How long `connect_wal` keeps retrying a database another process is setting up at the same time."""
TRACE_WAIT_S = 30.0
"""How long a write to the trace database (a run's checkpoint, its run-id claim) waits while another process
holds the file's write lock (SQLite's busy timeout). SQLite's 5 s default made a finished run ineligible
("database is locked") while another process wrote for longer: a fault of the file, not of the clip. Readers
(`connect_read_only`: `raa runs`, `raa trace`) wait as long: a lock every waiting writer outlasted failed them."""

CACHE_WAIT_S = 5.0
"""How long a stage cache read or write waits while another process holds the file's write lock (its busy
timeout; in WAL mode a read does not wait on writers). Shorter than `TRACE_WAIT_S` on purpose: a cache that
cannot be read now is a miss and one that cannot take an entry loses only that entry (`graph.cache.lookup`,
`store`), never the run, while one wait holds the cache's lock and an "io" worker from every other stage of
the process (a long `raa prune --cache` or a VACUUM of the cache)."""

class StoreError(RuntimeError):
    """A trace database or stage cache that cannot be created or opened."""


class StoreWarning(UserWarning):
    """A trace database or stage cache on a network filesystem (see `network_fs_warning`)."""


NETWORK_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "ceph", "glusterfs", "9p", "afs",
    "panfs", "wekafs", "fuse.sshfs", "fuse.glusterfs", "fuse.cephfs", "fuse.juicefs", "fuse.s3fs",
    "fuse.gcsfuse"})
"""Filesystem types (as /proc/mounts names them) that SQLite's WAL mode does not work on."""

_checked: set[str] = set()  # paths already checked for a network filesystem in this process


def filesystem_type(path: str | Path, mounts: str | None = None) -> str | None:
    """The type of the filesystem holding `path` (its nearest existing folder): the longest mount point of
    `mounts` (the text of /proc/mounts; read when None) that contains it. None when unknown."""
    if mounts is None:
        try:
            mounts = Path("/proc/mounts").read_text()
        except OSError:  # not Linux
            return None
    place = Path(os.path.abspath(path))
    while not place.exists() and place != place.parent:
        place = place.parent
    place = place.resolve()
    best: tuple[int, str] | None = None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = Path(fields[1].replace("\\040", " "))
        if (place == point or point in place.parents) and (best is None or len(point.parts) > best[0]):
            best = (len(point.parts), fields[2])
    return None if best is None else best[1]


def network_fs_warning(path: str | Path, what: str, setting: str) -> str | None:
    """Why `path` should move, when it is on a network filesystem: SQLite's WAL mode (which lets training
    ranks and batch workers share one file) needs every process on one host and a local disk; on NFS,
    Lustre or GPFS, the default relative `runs/` of a job started in a shared home or project folder,
    concurrent writers can corrupt it."""
    if str(path) == ":memory:":
        return None
    kind = filesystem_type(path)
    if kind not in NETWORK_FILESYSTEMS:
        return None
    return (f"{what} {path} is on a network filesystem ({kind}); SQLite's WAL mode needs a local disk, and "
            f"processes writing it together can corrupt it: set {setting} to a path on a local disk")


@contextmanager
def store_errors(path: str | Path, what: str, setting: str, *, read_only: bool = False) -> Iterator[None]:
    """Turn SQLite and file-system errors raised while opening `path` into a `StoreError` that names
    the file (`what`: "trace database" / "stage cache") and the setting that chooses it. A file on a
    network filesystem gets a `StoreWarning` (once per path and process); one opened only to be read
    (`read_only`) gets neither the warning nor the advice to move or delete it."""
    if not read_only and str(path) not in _checked:  # /proc/mounts is read once per path, not at every open
        _checked.add(str(path))
        if (warning := network_fs_warning(path, what, setting)) is not None:
            warnings.warn(warning, StoreWarning, stacklevel=3)
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        if isinstance(exc, sqlite3.OperationalError) and locked(exc):  # the file is fine: wait, never delete it
            raise StoreError(f"{what} {path} is locked by another process ({exc}): one writing it for long (a "
                             "`raa prune --vacuum`, another program's transaction); try again when it is done") \
                from exc
        if read_only:
            raise StoreError(f"{what} {path} cannot be read ({type(exc).__name__}: {exc}); check that it is "
                             f"a {what} this user may read, or give another path ({setting})") from exc
        raise StoreError(f"{what} {path} cannot be used ({type(exc).__name__}: {exc}); move or delete "
                         f"it, or choose another path ({setting})") from exc


TRACE_TABLES = frozenset({"checkpoints", "writes"})
"""LangGraph's SqliteSaver tables: what makes a file a trace database."""
CACHE_TABLES = frozenset({"stage_cache"})
"""The stage cache's table."""
TABLES_SQL = "SELECT name FROM sqlite_master WHERE type = 'table'"
"""The names of a SQLite file's tables."""


def refuse_other_database(conn: sqlite3.Connection, what: str, own: frozenset[str]) -> None:
    """sqlite3.DatabaseError (a StoreError inside `store_errors`) when the file already holds tables but none of
    `own`: another database given by mistake (the stage cache as `--db`), which opening would have filled with
    this store's tables. An empty or new file is fine."""
    check_tables([r[0] for r in conn.execute(TABLES_SQL)], what, own)



def check_tables(tables: list[str], what: str, own: frozenset[str]) -> None:
    """`refuse_other_database` on a file's table names (for async connections too)."""
    if tables and not own & set(tables):
        raise sqlite3.DatabaseError(f"it holds other tables ({', '.join(sorted(tables)[:5])}), not a {what}'s")


def ensure_parent(path: str | Path) -> None:
    """Create the folder of `path` (nothing for SQLite's ":memory:")."""
    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)


def connect_read_only(path: str | Path, what: str, own: frozenset[str]) -> sqlite3.Connection:
    """A connection that only reads the existing SQLite file at `path` (never creates it, switches its journal
    mode or migrates it), checked with `refuse_other_database`. When this process may not write the file or its
    folder (a teammate's runs/ on a shared folder, a read-only mount) and SQLite cannot open it read-only (a
    WAL database needs its -shm index, which it then cannot create), the file is opened as immutable: what
    its WAL file holds on top is not seen."""
    uri = Path(path).resolve().as_uri()  # percent-encoded: a "?" or "#" in a folder name stays in the path
    try:
        return _read_connection(f"{uri}?mode=ro", what, own)
    except sqlite3.OperationalError:
        if os.access(path, os.W_OK) and os.access(Path(path).resolve().parent, os.W_OK):
            raise  # a writer's lock or a broken file: nothing that reading it immutable would mend
    return _read_connection(f"{uri}?immutable=1", what, own)


@contextmanager
def closed_on_error(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """`conn`, closed when the block raises (a refused or failed open): an open connection to a WAL file keeps
    -wal / -shm files beside it."""
    try:
        yield conn
    except BaseException:
        conn.close()
        raise


def _read_connection(uri: str, what: str, own: frozenset[str]) -> sqlite3.Connection:
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=TRACE_WAIT_S)  # as writers wait
    with closed_on_error(conn):
        refuse_other_database(conn, what, own)  # the first read: opens the WAL index
    return conn


def connect_wal(path: str | Path, what: str, own: frozenset[str], *,
                isolation_level: Literal["", "DEFERRED", "EXCLUSIVE", "IMMEDIATE"] | None = "",
                timeout: float = 5.0, create: bool = True) -> sqlite3.Connection:
    """A connection to `path` in WAL mode (":memory:" stays in memory), the switch retried while another
    process holds the lock it needs (`retry_locked`). A file holding other tables than `own` (another program's
    database, `refuse_other_database`) is refused before the switch, its connection closed: WAL is a lasting
    property of a file (its header), and the open connection left -wal / -shm files beside it, so another
    program's file was changed by being refused. `isolation_level`: as `sqlite3.connect` ("" = its default;
    None = autocommit); `timeout`: its busy timeout in seconds. Without `create`, a file not there is not made
    (SQLite's ``mode=rw``, through a file: URI of the resolved path, quoted: "?", "#", "%" in a name are the
    file's): sqlite3.OperationalError, in the one open (no look before it that the file could be removed
    after)."""
    memory = str(path) == ":memory:"  # a name to SQLite, not a file: as a URI it was ./:memory: (none: an error)
    target, uri = (str(path), False) if create or memory else (f"{Path(path).resolve().as_uri()}?mode=rw", True)
    # typeshed's isolation_level omits "", sqlite3's own default (implicit deferred transactions)
    conn = sqlite3.connect(target, uri=uri, check_same_thread=False,
                           isolation_level=isolation_level, timeout=timeout)  # type: ignore[arg-type]

    def wal() -> None:
        refuse_other_database(conn, what, own)  # before anything is written to the file
        if str(path) != ":memory:":  # WAL: a commit appends to the log instead of an fsync per write
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")

    with closed_on_error(conn):
        retry_locked(conn, wal)
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
            if not _worth_retrying(exc, deadline):
                raise
            if conn.in_transaction:
                conn.rollback()
            time.sleep(_pause())


async def aretry_locked(conn: Any, step: Callable[[], Awaitable[None]], wait_s: float = OPEN_WAIT_S) -> None:
    """`retry_locked` for an aiosqlite connection `conn` and an async `step` (`AsyncSqliteSaver.setup`)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            await step()
            return
        except sqlite3.OperationalError as exc:  # aiosqlite raises sqlite3's own errors
            if not _worth_retrying(exc, deadline):
                raise
            if conn.in_transaction:
                await conn.rollback()
            await asyncio.sleep(_pause())


def locked(exc: sqlite3.OperationalError) -> bool:
    """Whether `exc` is SQLite's "database is locked" / "busy": another connection holds the lock it needed."""
    return "locked" in str(exc) or "busy" in str(exc)


def _worth_retrying(exc: sqlite3.OperationalError, deadline: float) -> bool:
    return locked(exc) and time.monotonic() <= deadline


def _pause() -> float:
    """A short random pause (s), so that processes racing for one lock do not keep colliding."""
    return 0.02 + random.random() * 0.08
