"""A trace database another process holds locked (a `raa prune --vacuum` rewriting it, a writer's long
transaction on a rollback-journal file) is a StoreError that says so: `raa runs` told the user to check that it was
"a trace database this user may read", and a command that writes it to "move or delete it" (their traces)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from graph.cli import app
from graph.stores import TRACE_WAIT_S, StoreError, store_errors
from graph.tracing import open_saver

HOLD = """
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN EXCLUSIVE"); c.execute("DELETE FROM writes")
print("locked", flush=True); time.sleep(float(sys.argv[2])); c.rollback()
print("released", flush=True); time.sleep(30)
"""


def _runs_while_locked(db, hold_s: float):
    """`raa runs` on `db` (a rollback journal: a writer's lock keeps readers out) while a process holds it
    locked for `hold_s` seconds."""
    open_saver(db).conn.close()
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(db), str(hold_s)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        return CliRunner().invoke(app, ["runs", "--db", str(db)])
    finally:
        holder.kill()
        holder.wait()


def test_runs_on_a_locked_database_says_it_is_locked(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("graph.stores.TRACE_WAIT_S", 1.0)  # the wait readers give a writer's lock, shortened
    # held 4 s: past that wait, but short of SQLite's 5 s default, which a reader must not fall back on (it would
    # outwait this lock and list the runs)
    res = _runs_while_locked(tmp_path / "traces.sqlite", 4)
    assert res.exit_code == 2, (res.output, res.exception)  # graph.cli's app prints the StoreError as one line
    text = res.stderr
    assert text.startswith("error: ") and "Traceback" not in text, text
    assert "locked by another process" in text and "may read" not in text, text


def test_readers_wait_for_a_lock_as_long_as_writers_do(tmp_path, monkeypatch) -> None:
    """Readers waited SQLite's default 5 s for a writer's lock, writers `TRACE_WAIT_S` (30 s): `raa runs` / `raa
    trace` failed "locked" on a lock that every run waiting to write its checkpoint outlasted. A reader waits
    `TRACE_WAIT_S` (here shortened; the test above sees a reader give up after it, before SQLite's 5 s), so a
    lock released within it is waited out."""
    assert TRACE_WAIT_S > 5  # the real wait outlasts SQLite's default
    monkeypatch.setattr("graph.stores.TRACE_WAIT_S", 3.0)
    res = _runs_while_locked(tmp_path / "traces.sqlite", 1)
    assert res.exit_code == 0 and res.exception is None, (res.output, res.exception)


@pytest.mark.parametrize("read_only", [False, True])
def test_a_lock_is_never_advice_to_delete_the_file(tmp_path, read_only) -> None:
    with pytest.raises(StoreError) as info, store_errors(tmp_path / "t.sqlite", "trace database", "RAA_TRACES_PATH",
                                                         read_only=read_only):
        raise sqlite3.OperationalError("database is locked")
    text = str(info.value)
    assert "locked by another process" in text and "delete" not in text and "may read" not in text, text
