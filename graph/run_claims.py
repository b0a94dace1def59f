"""Run ids claimed in the trace database while their runs are in flight (every run of the compiled agent,
`graph.thread_claims`).

With the default durability ("exit") a run writes its checkpoint only when it ends, so the "already has a
trace" check before a run cannot see a run of the same id in progress in another process sharing the
trace file (two `score_video` scripts given one run id, a restarted job racing its predecessor): both
ran, and the later checkpoint silently became the trace of both results. Before it starts, a run now
inserts its id into the `raa_run_claims` table of the same SQLite file, in one write transaction with
the look-up, and deletes it when it has ended (after its checkpoint is written): a second process finds
the claim and its run is refused.

Decisions where the issue was silent:
- A claim names its process (host, pid). One whose process is gone (a crash, a kill) is stale and taken
  over. Whether a process on another host runs cannot be asked, and such a claim was never taken over: a
  crashed machine's claims (or those of a container restarted under a new hostname) refused their run ids,
  and `raa prune` spared their runs, for good. A claim from another host is now stale once it is older than
  a maximum age (its `claimed` time, written by that host's clock; one that does not read as a
  time is stale too, as nothing written by this module looks so). The limit is an age, not a heartbeat:
  a live process on another host sharing the file is already a misuse (SQLite's WAL mode needs every writer
  on one host), so the rule only has to free a dead host's claims, not to track live ones; it is set well
  above any run's length (`raa score-batch --run-timeout` defaults to one hour), so a run of another host
  that were still going would lose its claim only after hours. The age is a setting
  (`BackboneSettings.foreign_claim_max_age_s`, RAA_FOREIGN_CLAIM_MAX_AGE_S; default `FOREIGN_CLAIM_MAX_AGE_S`,
  6 h), handed to `claim` and `running` by their callers: an operator whose crashed node's claims block run ids
  shortens it, and one whose runs take longer lengthens it. Every process sharing a file should use one value.
- A dead process's pid may since belong to another process, which made its claim look alive and its id
  refused until that process ended. Where the system tells a process's start time (Linux:
  `/proc/<pid>/stat`, in clock ticks since boot, fixed for the process's life), a claim also records its
  process's start in a side table, `raa_run_claim_starts`, and a claim whose pid now runs a process that
  started at another time is stale. Elsewhere, and for claims written before this table existed, a
  running pid counts as alive (as before). A side table rather than a new column: earlier versions insert
  four values into `raa_run_claims` and would fail on a fifth column of a trace file they share.
- Only file-backed SQLite checkpointers (LangGraph's SqliteSaver, AsyncSqliteSaver) get claims; in-memory
  ones are private to their process, where `graph.api` keeps its own set of running ids.
- The claim uses its own short connection (one small commit at the start of a run and one at its end),
  in a worker thread: the checkpointer's connection is busy with the runs' checkpoints, and a claim
  that waits for another process's write must not stall the event loop.
- A task cancelled while its claim is being written (a cancelled request, Ctrl-C) cannot stop that write,
  and never learns that it holds the claim, so it would never release it: the claim stayed until the
  process exited and the id was refused as "already running" meanwhile. Another worker thread of the loop
  waits for the write and drops the claim if it took it (`claim`).
- A run that ends with an error, is cancelled or is closed early (`graph.thread_claims`) may have failed on
  another process's write lock (its final trace write, `RewardResult.trace_saved` false), which its release
  would meet again: awaited, the release held the error or result back for up to `WAIT_S` more and then, the
  lock still held, gave up and left the claim. Such a run's claim is released in a daemon thread
  (`release_later`) and its error or result returned at once; the thread waits for the lock as long as a
  release does (`WAIT_S`). A process that exits meanwhile leaves the claim of a dead process, which is taken
  over (`join_releases` waits for these threads, e.g. before a short script exits). A claim of an id by this
  process first waits (up to `WAIT_S`) for every release of it still pending (these, a cancelled claim's, one
  cancelled at a run's end): a retry or resume right after was refused as "already running" in its own process.
- `raa prune --vacuum` must not rewrite the file under a run in flight (the VACUUM holds the write lock longer
  than the run's trace writes wait), but its check of the claims and its VACUUM were two steps, and a run
  claimed between them went ahead. VACUUM cannot run inside a transaction, so the check cannot share one with
  it; instead `fence_vacuum` reads the claims and, when none is live, writes a row naming its process into
  `raa_vacuums`, in one write transaction, and `unfence_vacuum` drops it after the VACUUM. A claim reads that
  table in its own write transaction, so it sees either the fence or no vacuum yet (which then sees its
  claim); it waits on a live fence as on the write lock (`WAIT_S`, polling every `FENCE_POLL_S`), then
  fails naming the vacuum (`VacuumFence`), as a claim that waited out a VACUUM's lock did. A fence is live by
  the same rule as a claim (`_alive`), so a prune killed mid-vacuum blocks nothing once it is gone, and the
  next vacuum's fence deletes its row, with the claims of runs that died (with no run in flight, every claim
  left is one). Versions before the fence ignore it (their runs keep the old race).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from graph.claim_releases import Claiming, join_releases, pending, release_after
from graph.stores import TRACE_WAIT_S
from tools.procstat import STARTTIME, read_stat_field

CLAIMS_TABLE = "raa_run_claims"
_CREATE = (f"CREATE TABLE IF NOT EXISTS {CLAIMS_TABLE} (thread_id TEXT PRIMARY KEY, host TEXT NOT NULL, "
           "pid INTEGER NOT NULL, claimed TEXT NOT NULL)")
STARTS_TABLE = "raa_run_claim_starts"
_CREATE_STARTS = (f"CREATE TABLE IF NOT EXISTS {STARTS_TABLE} (thread_id TEXT PRIMARY KEY, host TEXT NOT NULL, "
                  "pid INTEGER NOT NULL, started INTEGER NOT NULL)")
FOREIGN_CLAIM_MAX_AGE_S = 6 * 3600.0
"""Default age (s) after which a claim written on another host is stale (module docstring)."""
WAIT_S = TRACE_WAIT_S
"""How long a claim waits for another process's write to the trace file (SQLite's busy timeout), and for a
vacuum's fence (module docstring)."""
VACUUMS_TABLE = "raa_vacuums"
_CREATE_VACUUMS = (f"CREATE TABLE IF NOT EXISTS {VACUUMS_TABLE} (host TEXT NOT NULL, pid INTEGER NOT NULL, "
                   "started INTEGER, claimed TEXT NOT NULL, PRIMARY KEY (host, pid))")
FENCE_POLL_S = 0.05
"""How often a claim waiting on a vacuum's fence looks again."""


class VacuumFence(sqlite3.OperationalError):
    """A claim gave up waiting (`WAIT_S`) for a `raa prune --vacuum` of its trace file to end."""


def sqlite_file(checkpointer: Any) -> str | None:
    """The file of a SQLite checkpointer for a synchronous run; None for in-memory databases and other checkpointers
    (`database_file`). An AsyncSqliteSaver's is read on its event loop, where LangGraph runs the saver's sync calls
    from another thread (a sync `agent.invoke` in a worker thread); it wrote no claim. None on the loop's own thread
    (LangGraph refuses the sync call there: waiting on the loop would hang) or with the loop not running."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    if isinstance(checkpointer, AsyncSqliteSaver):
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:  # no loop runs in this thread
            here = None
        if here is checkpointer.loop or not checkpointer.loop.is_running():
            return None
        return asyncio.run_coroutine_threadsafe(database_file(checkpointer), checkpointer.loop).result()
    if not isinstance(checkpointer, SqliteSaver):
        return None
    with checkpointer.lock:
        return _main_file(checkpointer.conn.execute("PRAGMA database_list").fetchall())


async def database_file(checkpointer: Any) -> str | None:
    """The file of a SQLite checkpointer; None for in-memory databases and other checkpointers."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    if isinstance(checkpointer, AsyncSqliteSaver):
        async with checkpointer.lock:
            return _main_file(list(await (await checkpointer.conn.execute("PRAGMA database_list")).fetchall()))
    return await asyncio.to_thread(sqlite_file, checkpointer)


def _main_file(rows: list[Any]) -> str | None:
    return next((str(row[2]) for row in rows if row[1] == "main" and row[2]), None)


async def claim(file: str, run_id: str, max_age_s: float = FOREIGN_CLAIM_MAX_AGE_S) -> str | None:
    """Claim `run_id` in the trace database `file`: None when claimed, else who holds it (`max_age_s`: when
    another host's claim is stale). A cancelled caller holds no claim afterwards (module docstring)."""
    claiming = Claiming()
    try:
        return await asyncio.to_thread(_claim_for, file, run_id, claiming, max_age_s)
    except asyncio.CancelledError:  # the write may go on or have committed: released once it is done, if taken
        _release_cancelled(file, run_id, claiming)
        raise


def _claim_for(file: str, run_id: str, claiming: Claiming, max_age_s: float) -> str | None:
    """`_claim`, telling `claiming` whether it took the claim once done (a cancelled caller's release waits)."""
    try:
        join_releases(WAIT_S, (file, run_id), claiming)  # not the release of this very claim, which waits for it
        holder = _claim(file, run_id, max_age_s)
        claiming.taken = holder is None
        return holder
    finally:
        claiming.done.set()


def claim_blocking(file: str, run_id: str, max_age_s: float = FOREIGN_CLAIM_MAX_AGE_S) -> str | None:
    """`claim` written in the calling thread, for a synchronous run (`graph.thread_claims`)."""
    join_releases(WAIT_S, (file, run_id))
    return _claim(file, run_id, max_age_s)


def release_later(file: str, run_id: str) -> threading.Event:
    """Drop this process's claim of `run_id` in a daemon thread, returning at once (module docstring: a run that
    ended with an error, was cancelled or closed early) the event the thread sets once done. A failure leaves the
    claim as `release_quietly` does."""
    released = pending(file, run_id, None)
    threading.Thread(target=release_after, args=(release_quietly, file, run_id, None, released),
                     name=f"raa-release-{run_id}", daemon=True).start()
    return released


def release_blocking(file: str, run_id: str) -> None:
    """`release` for a synchronous run that ended (`graph.thread_claims`): waits for the release in its thread, so a
    Ctrl-C while it waits on another process's write lock leaves it going on, listed as pending; in the calling
    thread the interrupt rolled the release back and the claim stayed for the process's life."""
    release_later(file, run_id).wait()


async def release(file: str, run_id: str) -> None:
    """Drop this process's claim of `run_id` in a worker thread (a run that ended), listed as pending (a
    cancellation here leaves it going on)."""
    await asyncio.to_thread(release_after, release_quietly, file, run_id, None, pending(file, run_id, None))


def _release_cancelled(file: str, run_id: str, claiming: Claiming) -> None:
    """Drop the claim a cancelled `claim` took, once written, in a worker thread of the loop (its end waits for
    it) or, the loop's executor shut down, in a daemon thread."""
    args = (release_quietly, file, run_id, claiming, pending(file, run_id, claiming))
    try:
        asyncio.get_running_loop().run_in_executor(None, release_after, *args)
    except RuntimeError:  # the loop's executor is shut down
        threading.Thread(target=release_after, args=args, name=f"raa-release-{run_id}", daemon=True).start()


def _connect(file: str) -> sqlite3.Connection:
    return sqlite3.connect(file, timeout=WAIT_S, isolation_level=None)


@contextmanager
def _write_transaction(file: str) -> Iterator[sqlite3.Connection]:
    """A connection to `file` inside a BEGIN IMMEDIATE transaction (the write lock first: look-ups and writes are
    one step), committed on leaving unless the body ended it itself, rolled back on an exception."""
    conn = _connect(file)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            if conn.in_transaction:
                conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    finally:
        conn.close()


def _claim(file: str, run_id: str, max_age_s: float = FOREIGN_CLAIM_MAX_AGE_S) -> str | None:
    """Claim `run_id` in `file` (None), or say who holds it; waits out a vacuum's fence up to `WAIT_S`, then
    raises `VacuumFence`. Its callers first wait for this process's pending release of it (module docstring)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        with _write_transaction(file) as conn:
            if (vacuum := _vacuuming(conn, max_age_s)) is None:
                holder = _claim_in(conn, run_id, max_age_s)
                conn.execute("COMMIT" if holder is None else "ROLLBACK")
                return holder
            conn.execute("ROLLBACK")
        if time.monotonic() >= deadline:
            raise VacuumFence(f"the trace database {file} is being vacuumed (raa prune --vacuum) by {vacuum}; "
                              f"waited {WAIT_S:.0f} s")
        time.sleep(FENCE_POLL_S)


def _claim_in(conn: sqlite3.Connection, run_id: str, max_age_s: float) -> str | None:
    """In `conn`'s open write transaction: write this process's claim of `run_id` (None), or say who holds it."""
    conn.execute(_CREATE)
    conn.execute(_CREATE_STARTS)
    if (held := claim_of(conn, run_id, max_age_s)) is not None and held[0]:
        return held[1]
    host, pid = socket.gethostname(), os.getpid()
    conn.execute(f"INSERT OR REPLACE INTO {CLAIMS_TABLE} VALUES (?, ?, ?, ?)",
                 (run_id, host, pid, dt.datetime.now(dt.UTC).isoformat(timespec="seconds")))
    conn.execute(f"DELETE FROM {STARTS_TABLE} WHERE thread_id = ?", (run_id,))
    if (started := process_start(pid)) is not None:
        conn.execute(f"INSERT INTO {STARTS_TABLE} VALUES (?, ?, ?, ?)", (run_id, host, pid, started))
    return None


def claim_of(conn: sqlite3.Connection, run_id: str,
             max_age_s: float = FOREIGN_CLAIM_MAX_AGE_S) -> tuple[bool, str] | None:
    """The claim on `run_id` read on `conn` (read-only is enough): (whether its process may still be running,
    `_alive`; "process N on HOST (since T)"), or None when there is none (a file without claims included)."""
    return next(((alive, who) for _, alive, who, _ in claims(conn, max_age_s, run_id)), None)


def claims(conn: sqlite3.Connection, max_age_s: float = FOREIGN_CLAIM_MAX_AGE_S,
           run_id: str | None = None) -> list[tuple[str, bool, str, str]]:
    """The claims read on `conn` (read-only is enough), newest first, or only `run_id`'s: (run id, whether its
    process may still be running (`_alive`), "process N on HOST (since T)", the claim's time). Empty for a file
    without claims; claims written before the side table of process starts existed are read without it."""
    where, args = ("WHERE c.thread_id = ?", (run_id,)) if run_id is not None else ("", ())
    queries = (f"SELECT c.thread_id, c.host, c.pid, c.claimed, s.started FROM {CLAIMS_TABLE} c LEFT JOIN "
               f"{STARTS_TABLE} s ON s.thread_id = c.thread_id AND s.host = c.host AND s.pid = c.pid {where}",
               f"SELECT c.thread_id, c.host, c.pid, c.claimed, NULL FROM {CLAIMS_TABLE} c {where}")
    for query in queries:
        try:
            rows = conn.execute(f"{query} ORDER BY c.claimed DESC", args).fetchall()
            break
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
    else:
        return []
    return [(str(tid), _alive(str(host), int(pid), None if started is None else int(started), str(claimed),
                              max_age_s), f"process {pid} on {host} (since {claimed})", str(claimed))
            for tid, host, pid, claimed, started in rows]


def _vacuuming(conn: sqlite3.Connection, max_age_s: float) -> str | None:
    """Which live process fences the file for its vacuum ("process N on HOST (since T)"), or None."""
    try:
        rows = conn.execute(f"SELECT host, pid, started, claimed FROM {VACUUMS_TABLE}").fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None
        raise
    return next((f"process {row[1]} on {row[0]} (since {row[3]})" for row in rows if _fence_alive(row, max_age_s)),
                None)


def _fence_alive(row: tuple, max_age_s: float) -> bool:
    """Whether the process of a fence row (host, pid, started, claimed) may still be running (`_alive`)."""
    host, pid, started, claimed = row
    return _alive(str(host), int(pid), None if started is None else int(started), str(claimed), max_age_s)


def fence_vacuum(file: str, max_age_s: float = FOREIGN_CLAIM_MAX_AGE_S) -> list[str]:
    """In one write transaction: the runs in flight in `file` (sorted; then nothing is written), or, when
    there are none, a fence naming this process that new claims wait on (returns []); then the claims left
    (all of dead runs) and the fences of prunes that died before dropping theirs are deleted. Drop the fence
    with `unfence_vacuum` once the VACUUM has ended (module docstring)."""
    with _write_transaction(file) as conn:
        ids = sorted(running(conn, max_age_s))
        if not ids:
            conn.execute(_CREATE_VACUUMS)
            rows = conn.execute(f"SELECT host, pid, started, claimed FROM {VACUUMS_TABLE}").fetchall()
            conn.executemany(f"DELETE FROM {VACUUMS_TABLE} WHERE host = ? AND pid = ?",  # killed prunes' fences
                             [row[:2] for row in rows if not _fence_alive(row, max_age_s)])
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            for table in (CLAIMS_TABLE, STARTS_TABLE):  # no run in flight: every claim left is a dead run's
                if table in tables:
                    conn.execute(f"DELETE FROM {table}")
            host, pid = socket.gethostname(), os.getpid()
            conn.execute(f"INSERT OR REPLACE INTO {VACUUMS_TABLE} VALUES (?, ?, ?, ?)",
                         (host, pid, process_start(pid), dt.datetime.now(dt.UTC).isoformat(timespec="seconds")))
    return ids


def unfence_vacuum(file: str) -> None:
    """Drop this process's vacuum fence in `file` (`fence_vacuum`)."""
    conn = _connect(file)
    try:
        conn.execute(f"DELETE FROM {VACUUMS_TABLE} WHERE host = ? AND pid = ?", (socket.gethostname(), os.getpid()))
    finally:
        conn.close()


def _release(file: str, run_id: str) -> None:
    mine = (run_id, socket.gethostname(), os.getpid())
    with _write_transaction(file) as conn:
        conn.execute(f"DELETE FROM {CLAIMS_TABLE} WHERE thread_id = ? AND host = ? AND pid = ?", mine)
        conn.execute(f"DELETE FROM {STARTS_TABLE} WHERE thread_id = ? AND host = ? AND pid = ?", mine)


def release_quietly(file: str, run_id: str) -> None:
    """Drop this process's claim of `run_id` (its run has ended): a failure leaves a claim that is taken over once
    this process has ended, as when the process dies during a run."""
    try:
        _release(file, run_id)
    except Exception:  # noqa: BLE001 - nobody to tell; see the docstring
        pass


def process_start(pid: int) -> int | None:
    """When process `pid` started, in clock ticks since boot (Linux's /proc/<pid>/stat, field 22); None
    where the system does not tell (no /proc, no such process, an unreadable line)."""
    return read_stat_field(pid, STARTTIME)


def running(conn: sqlite3.Connection, max_age_s: float = FOREIGN_CLAIM_MAX_AGE_S) -> set[str]:
    """The run ids claimed by a process that may still be running (`_alive`; `max_age_s`: when another
    host's claim is stale), read on `conn`, a connection to the trace database (read-only is enough): the
    runs in flight (`raa prune` spares them). Empty for a file without claims."""
    return {run_id for run_id, alive, _, _ in claims(conn, max_age_s) if alive}


def _alive(host: str, pid: int, started: int | None = None, claimed: str = "",
           max_age_s: float = FOREIGN_CLAIM_MAX_AGE_S) -> bool:
    """Whether the claim's process may still be running (see module docstring); `started`: its process's
    start as the claim recorded it (`process_start`), None when it did not; `claimed`: the claim's time (ISO),
    which decides for a claim of another host, stale after `max_age_s`."""
    if host != socket.gethostname():
        return foreign_claim_fresh(claimed, dt.datetime.now(dt.UTC), max_age_s)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    if started is not None and (now := process_start(pid)) is not None:
        return now == started  # another start: the pid was reused by another process
    return True


def foreign_claim_fresh(claimed: str, now: dt.datetime, max_age_s: float = FOREIGN_CLAIM_MAX_AGE_S) -> bool:
    """Whether a claim of another host, made at `claimed` (ISO; UTC unless it names a zone), is younger than
    `max_age_s` at `now`. False for a time that cannot be read (module docstring)."""
    try:
        when = dt.datetime.fromisoformat(claimed)
    except ValueError:
        return False
    when = when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)
    return (now - when).total_seconds() < max_age_s
