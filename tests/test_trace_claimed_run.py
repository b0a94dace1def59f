"""`raa trace RUN_ID` of a run that has a claim in the trace database but no checkpoint yet: with the default
durability ("exit") a run writes its trace only when it ends, so a run in flight, or one whose process was killed
mid-way, was "no traced run with id ..." as if the id were mistyped. The error now says which it is."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

from typer.testing import CliRunner

from graph.cli import app
from graph.run_claims import CLAIMS_TABLE, _claim
from graph.tracing import open_saver


def _trace(db, run_id: str) -> str:
    res = CliRunner().invoke(app, ["trace", run_id, "--db", str(db)])
    assert res.exit_code == 1, res.output
    return res.output


def test_trace_of_a_run_in_flight_says_it_is_running(tmp_path) -> None:
    db = tmp_path / "traces.sqlite"
    open_saver(db).conn.close()
    assert _claim(str(db), "run-live") is None  # this process runs it
    out = _trace(db, "run-live")
    assert "still running" in out and "written when it ends" in out, out


def test_trace_of_a_run_whose_process_died_says_no_trace_was_saved(tmp_path) -> None:
    db = tmp_path / "traces.sqlite"
    open_saver(db).conn.close()
    assert _claim(str(db), "run-dead") is None
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE {CLAIMS_TABLE} SET pid = ? WHERE thread_id = 'run-dead'", (int(dead.stdout),))
    out = _trace(db, "run-dead")
    assert "ended before its trace was saved" in out, out
    assert "still running" not in _trace(db, "run-other") and "ended before" not in _trace(db, "run-other")
