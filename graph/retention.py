"""Trace retention: delete traced runs that are no longer needed (`raa prune`, whose command line is
`graph.prune_command`).

Every agent run leaves its checkpoint in the trace database (one per run by default, one per step with
``RAA_TRACE_DURABILITY=async``), and a long training run with ``reward: agent`` scores tens of thousands
of clips, so the database only grows. Decisions where no issue says:

* Selection (`select_runs`): runs are ordered newest first (as `raa runs` lists them); ``keep`` spares the
  newest N; ``before`` takes only runs last updated before a time; ``status`` only runs with that status
  (e.g. the ``incomplete`` runs a crash left). Given criteria combine: a run is deleted when it matches
  all of them. At least one is required, so nothing is deleted by accident. A finished run whose latest
  checkpoint is a time-travel fork not resumed yet reads as incomplete but is not one for ``--status
  incomplete`` (deleting the thread took its result with it). A run whose checkpoint cannot be decoded
  (`graph.tracing.UnreadableRunError`) has no time or status to judge: ``before`` / ``status`` spare it and
  the prune names it (it stopped the whole prune); ``keep`` alone reads no run and deletes it like any other.
* Runs are deleted as the checkpointer's own ``delete_thread`` deletes them (its checkpoints and pending
  writes, so the layout stays LangGraph's), all in one write transaction, counting only the runs that had
  checkpoints: ``delete_thread`` does not say whether it found any, and counting the ids given reported runs
  already gone (another prune while this one waited at its prompt) as deleted. "remain" is read from the
  file afterwards, not worked out from the selection. A run still in flight with per-step checkpoints
  (``RAA_TRACE_DURABILITY=async``) reads as ``incomplete``, like a crash's leftover, and ``--keep 0`` or
  ``--status incomplete`` took its history while it ran. A run in flight holds a claim on its id in the
  same file (`graph.run_claims`), so every run claimed by a live process is spared, whatever the criteria
  (and checked again just before deleting, for a run started meanwhile under a selected id).
* SQLite reuses the pages freed by a delete, so the file stops growing but does not shrink; ``vacuum``
  rewrites it to its new size. VACUUM holds the file's write lock while it rewrites it: it fails as a
  StoreError naming the file only when another process's write transaction keeps it waiting ``wait_s``;
  a process that merely has the file open (a training run between checkpoints, `raa score-batch`) does
  not stop it, and its writes wait meanwhile (up to `graph.stores.TRACE_WAIT_S`, then that run is
  ineligible, "database is locked"). Hence ``--vacuum`` is for when no other process uses the file. On a big
  trace database the rewrite takes longer than those writes wait (30 s), and every run in flight lost its
  trace: ``--vacuum`` of a trace database holding runs claimed by live processes (`graph.run_claims`) is
  refused (exit 2; a prune's deletions still happen), and a vacuum says what it rewrites before it starts.
  The check and the VACUUM cannot share a transaction: the check fences the file in the same write transaction
  (`graph.run_claims.fence_vacuum`), so a run claimed right after it waits for the vacuum instead of going
  ahead under it, as a run that starts during the vacuum waits for it (its claim needs the write lock).
  A trace database that holds no runs' tables yet (an empty file) is left alone: the fence's table in it made
  every command refuse it as another database. ``--vacuum`` shrinks the files its criteria name also when nothing matches now (`--keep N --vacuum` after
  a prune without it). ``--vacuum`` alone (no criterion) is allowed, as it deletes nothing: it shrinks the
  trace database and the stage cache without asking (`graph.prune_command.vacuum_only`); without any option the command still
  refuses.
* The stage cache has its own options, since its entries are shared by runs and no run criterion
  applies to them: ``--cache`` deletes every entry, ``--cache-before WHEN`` those stored before then
  (`stage_cache_entries`); both together are refused (exit 2), as neither reading is safe to guess. Neither touches runs, and ``--before`` never touches the cache, so old
  cache entries can go while every trace stays. A deleted entry costs one model call the next time
  the same stage input comes.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import typer
from langgraph.checkpoint.sqlite import SqliteSaver

from graph.cache import CACHE_TABLES, dated  # the stage cache's own table and schema
from graph.run_claims import FOREIGN_CLAIM_MAX_AGE_S, fence_vacuum, running, unfence_vacuum
from graph.stores import TABLES_SQL, TRACE_TABLES, TRACE_WAIT_S, connect_read_only, connect_wal, store_errors
from graph.tracing import RUN_STATUSES, UnreadableRunError, ever_finished, open_saver, read_trace, run_ids

_AGE = re.compile(r"^(\d+)\s*([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_cutoff(text: str, now: datetime) -> datetime:
    """The time `text` names: an age before `now` (``30m``, ``12h``, ``7d``, ``2w``) or an ISO date / date
    and time (``2026-11-01``, ``2026-11-01T12:00``; UTC unless it names a zone). ValueError otherwise."""
    text = text.strip()
    if (age := _AGE.match(text)) is not None:
        return now - timedelta(**{_UNITS[age.group(2)]: int(age.group(1))})
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is neither an age (30m, 12h, 7d, 2w) nor an ISO date or date and time "
                         "(2026-11-01, 2026-11-01T12:00)") from None
    return _as_utc(when)


def _as_utc(when: datetime) -> datetime:
    """`when`, read as UTC when it names no zone."""
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Selection:
    """What a prune would delete."""

    run_ids: list[str]
    """Runs to delete, newest first."""
    total: int
    """Runs in the database."""
    running: int = 0
    """Runs that matched but are in flight (claimed by a live process), so are spared."""
    unreadable: list[str] = field(default_factory=list)
    """Runs whose checkpoint cannot be decoded, so `before` / `status` cannot judge them: spared (`keep` alone
    needs no run's contents and deletes them like any other)."""


def select_runs(path: str | Path, *, keep: int | None = None, before: datetime | None = None,
                status: str | None = None, claim_max_age_s: float = FOREIGN_CLAIM_MAX_AGE_S) -> Selection:
    """The runs of the trace database at `path` that match every given criterion (module docstring), but
    those in flight (`claim_max_age_s`: when another host's claim is stale, `graph.run_claims`).
    ValueError when none is given, for a negative `keep` or an unknown `status`."""
    if keep is None and before is None and status is None:
        raise ValueError("say which runs to delete: keep the newest N, runs before a time, or runs with a status")
    if keep is not None and keep < 0:
        raise ValueError(f"keep must be >= 0, got {keep}")
    if status is not None and status not in RUN_STATUSES:
        raise ValueError(f"status must be one of {', '.join(RUN_STATUSES)}, got {status!r}")
    saver = open_saver(path, read_only=True)
    try:
        ids = list(run_ids(saver))
        candidates = ids[keep:] if keep is not None else ids
        if before is None and status is None:
            return _sparing_in_flight(saver, candidates, len(ids), claim_max_age_s)
        chosen, unreadable = [], []
        for run_id in candidates:  # reads each candidate's last checkpoint: its time and status
            try:
                run = read_trace(saver, run_id, claim_max_age_s)
                if before is not None and not _updated_before(run.updated, before):
                    continue
                # a run in flight reads "running" (graph.tracing), an unfinished run here: spared below, and counted
                if status is not None and ("incomplete" if run.status == "running" else run.status) != status:
                    continue
                if status == "incomplete" and ever_finished(saver, run_id):  # a fork of a finished run: no crash
                    continue
            except UnreadableRunError:  # one damaged run (or older checkpoint) stopped every prune by time or status
                unreadable.append(run_id)
                continue
            chosen.append(run_id)
        return _sparing_in_flight(saver, chosen, len(ids), claim_max_age_s, unreadable)
    finally:
        saver.conn.close()


def _sparing_in_flight(saver: SqliteSaver, matching: list[str], total: int, claim_max_age_s: float,
                       unreadable: list[str] | None = None) -> Selection:
    """The selection of `matching` but the runs in flight (module docstring); `unreadable`: the runs spared
    because their checkpoint cannot be decoded."""
    in_flight = running(saver.conn, claim_max_age_s)
    chosen = [run_id for run_id in matching if run_id not in in_flight]
    return Selection(chosen, total, len(matching) - len(chosen), list(unreadable or []))


def _updated_before(updated: str, cutoff: datetime) -> bool:
    try:
        when = datetime.fromisoformat(updated)
    except ValueError:  # a checkpoint without a readable time is never taken for old
        return False
    return _as_utc(when) < cutoff


def delete_runs(path: str | Path, run_ids: Sequence[str], claim_max_age_s: float = FOREIGN_CLAIM_MAX_AGE_S) -> int:
    """Delete `run_ids` (checkpoints and writes) from the trace database at `path`, but not those in flight
    now (claimed by a live process; `claim_max_age_s` as for `select_runs`); returns how many runs had
    checkpoints to delete (module docstring)."""
    saver = open_saver(path)
    deleted = 0
    try:
        with store_errors(path, "trace database", "RAA_TRACES_PATH"), saver.lock:
            conn = saver.conn
            conn.execute("PRAGMA busy_timeout = 30000")  # another process may be writing a run
            conn.execute("BEGIN IMMEDIATE")  # the write lock first: no run is claimed between check and delete
            try:
                in_flight = running(conn, claim_max_age_s)
                for run_id in dict.fromkeys(run_ids):  # an id given twice is one run
                    if run_id in in_flight:
                        continue
                    # as SqliteSaver.delete_thread, whose count of deleted rows is not returned
                    gone = conn.execute("DELETE FROM checkpoints WHERE thread_id = ?", (run_id,)).rowcount
                    conn.execute("DELETE FROM writes WHERE thread_id = ?", (run_id,))
                    deleted += gone > 0
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
    finally:
        saver.conn.close()
    return deleted


def count_runs(path: str | Path) -> int:
    """How many runs the trace database at `path` holds now."""
    saver = open_saver(path, read_only=True)
    try:
        return len(list(run_ids(saver)))
    finally:
        saver.conn.close()


def vacuum(path: str | Path, what: str, setting: str, *, wait_s: float = 5.0) -> None:
    """Rewrite the SQLite file at `path` to its live size; StoreError when another connection's write keeps it
    waiting `wait_s` seconds (an idle one does not: see the module docstring)."""
    with store_errors(path, what, setting):
        conn = sqlite3.connect(str(path), timeout=wait_s, isolation_level=None)
        try:
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()


def vacuum_traces(path: str | Path, claim_max_age_s: float = FOREIGN_CLAIM_MAX_AGE_S) -> str | None:
    """`vacuum_and_say` the trace database at `path`, fenced against new claims meanwhile; or, runs in flight
    (`claim_max_age_s` as for `select_runs`), nothing rewritten and why not (module docstring)."""
    with store_errors(path, "trace database", "RAA_TRACES_PATH"):
        conn = connect_read_only(path, "trace database", TRACE_TABLES)  # another database given by mistake
        try:
            tables = {row[0] for row in conn.execute(TABLES_SQL)}
        finally:
            conn.close()
        if not tables & TRACE_TABLES:  # no run stored yet: the fence's table would make it "another database"
            typer.echo(f"{path} holds no runs yet: nothing to vacuum", err=True)
            return None
        ids = fence_vacuum(str(path), claim_max_age_s)
    if ids:
        return (f"not vacuuming {path}: {len(ids)} run(s) in flight ({', '.join(ids[:3])}"
                f"{' ...' if len(ids) > 3 else ''}); VACUUM locks the file while it rewrites it, and their trace "
                f"writes would fail after {TRACE_WAIT_S:.0f} s: vacuum once they have ended")
    try:
        vacuum_and_say(path, "trace database", "RAA_TRACES_PATH")
    finally:
        with store_errors(path, "trace database", "RAA_TRACES_PATH"):  # if it fails, the fence is stale once
            unfence_vacuum(str(path))                                    # this process has ended (_alive)
    return None


def vacuum_and_say(path: str | Path, what: str, setting: str) -> None:
    """`vacuum` the file at `path`, saying before (on stderr: it may take a while, the file locked) and after."""
    size = file_bytes(path)
    typer.echo(f"vacuuming {path} ({size / 2**20:.1f} MiB); the file is locked until it is rewritten", err=True)
    vacuum(path, what, setting)
    typer.echo(f"{path}: {size / 2**20:.1f} MiB -> {file_bytes(path) / 2**20:.1f} MiB")


def stage_cache_entries(path: str | Path, *, before: datetime | None = None, delete: bool = False) -> tuple[int, int]:
    """(entries stored before `before` (all when None; undated ones from an older cache always count), all
    entries) of the stage cache at `path`; with `delete`, those entries are deleted (then the first number
    is how many were). No file at `path`: (0, 0), and none is made (the open made an empty database there)."""
    where, args = ("", ()) if before is None else (" WHERE created IS NULL OR created < ?", (before.timestamp(),))
    with store_errors(path, "stage cache", "RAA_CACHE_PATH, or off"):
        try:
            conn = connect_wal(path, "stage cache", CACHE_TABLES, isolation_level=None, create=False)
        except sqlite3.OperationalError:
            if not Path(path).exists():  # no cache (yet, or removed since the caller looked): nothing in it
                return 0, 0
            raise
        try:
            conn.execute("PRAGMA busy_timeout = 30000")
            try:
                total = conn.execute("SELECT COUNT(*) FROM stage_cache").fetchone()[0]
                if before is not None and not dated(conn):  # a cache from before entries were dated: all old
                    where, args = "", ()
                if not delete:
                    return int(conn.execute("SELECT COUNT(*) FROM stage_cache" + where, args).fetchone()[0]), int(total)
                deleted = conn.execute("DELETE FROM stage_cache" + where, args).rowcount
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):
                    return 0, 0
                raise
        finally:
            conn.close()
    return int(deleted), int(total)


def file_bytes(path: str | Path) -> int:
    """Size of an SQLite database on disk, its write-ahead log included; a file not there counts 0. Each is stat'ed
    once: SQLite deletes the -wal file as its last connection closes, and one gone between ``exists`` and ``stat``
    raised FileNotFoundError."""
    p = Path(path)
    return sum(_size(f) for f in (p, p.with_name(p.name + "-wal")))


def _size(path: Path) -> int:
    """`path`'s size from one stat, 0 when nothing is there (`Path.exists`' answer for a missing file)."""
    try:
        return path.stat().st_size
    except (FileNotFoundError, NotADirectoryError):
        return 0
