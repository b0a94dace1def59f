"""`raa runs`, `raa trace` and `raa report` only read the trace database: a teammate's runs/ in a shared
folder this user cannot write, a read-only mount, or an old database in rollback-journal mode is read as it
is (`open_saver(read_only=True)`), never switched to WAL or migrated."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evals.report import write_run_report
from graph.cli import app
from graph.tracing import list_runs, open_saver
from tests.test_tracing import _graph

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def _traces(path: Path, journal_mode: str) -> Path:
    saver = open_saver(path)
    _graph(saver).invoke({"video": "/clips/a.mp4", "instruction": "pick the cube"},
                         {"configurable": {"thread_id": "run-aaa"}})
    saver.conn.execute(f"PRAGMA journal_mode={journal_mode}")
    saver.conn.close()  # the last connection: SQLite removes the -wal and -shm files
    return path


def _journal_byte(path: Path) -> int:
    return path.read_bytes()[18]  # the header's write version: 1 = rollback journal, 2 = WAL


def test_reading_leaves_a_rollback_journal_database_as_it_is(tmp_path):
    """SqliteSaver's setup switched a rollback-journal file to WAL: a write, refused where it may not write."""
    db = _traces(tmp_path / "traces.sqlite", "delete")
    before = db.read_bytes()
    assert _journal_byte(db) == 1
    res = runner.invoke(app, ["runs", "--db", str(db), "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["run_id"] == "run-aaa", res.output
    res = runner.invoke(app, ["trace", "run-aaa", "--db", str(db)], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "pick the cube" in res.output, res.output
    write_run_report("run-aaa", tmp_path / "report.html", traces_path=db)
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "traces.sqlite"]


def test_an_empty_file_reads_as_no_runs(tmp_path):
    db = tmp_path / "traces.sqlite"
    db.touch()
    assert list_runs(open_saver(db, read_only=True)) == []
    assert db.stat().st_size == 0


def test_a_file_that_cannot_be_read_is_not_to_be_deleted(tmp_path, capsys):
    db = tmp_path / "traces.sqlite"
    db.write_bytes(b"not a SQLite database" * 20)
    with pytest.raises(SystemExit) as info:
        app(["runs", "--db", str(db)], prog_name="raa")
    err = capsys.readouterr().err
    assert info.value.code == 2 and "cannot be read" in err and "delete" not in err, err


READ_ALL = """
import json, sys, traceback
from typer.testing import CliRunner
from graph.cli import app
runner = CliRunner()
def read_all(db, report):
    res = runner.invoke(app, ["runs", "--db", db, "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["run_id"] == "run-aaa", res.output
    res = runner.invoke(app, ["trace", "run-aaa", "--db", db], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "pick the cube" in res.output, res.output
    res = runner.invoke(app, ["report", "run-aaa", "--db", db, "--out", report])
    assert res.exit_code == 0, res.output
outcomes = {}
for db, report in zip(sys.argv[1::2], sys.argv[2::2]):
    try:
        read_all(db, report)
        outcomes[db] = "ok"
    except Exception:
        outcomes[db] = traceback.format_exc()
print(json.dumps(outcomes))
"""
"""Each (database, report) pair of its arguments read by `raa runs`, `raa trace` and `raa report`; prints what
each pair came to ("ok" or the failure) as one JSON object keyed by the database."""


def _as_unprivileged() -> list[str]:
    """A command prefix under which this user's permission bits apply (root ignores them: it runs without
    CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH then)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: permissions cannot be enforced")
    prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
    if subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
        pytest.skip("cannot drop root's capabilities here")
    return prefix


JOURNAL_MODES = ["wal", "delete"]


@pytest.fixture(scope="module")
def read_in_unwritable_folders(tmp_path_factory):
    """For each journal mode: a database in a folder this user cannot write, read by one subprocess with the
    permissions enforced (one for both modes: its start-up, importing graph.cli, is most of its time). Yields
    {mode: (folder, report, outcome)}."""
    prefix = _as_unprivileged()
    cases = {}
    for mode in JOURNAL_MODES:
        base = tmp_path_factory.mktemp(f"read_only_{mode}")
        shared = base / "shared"
        shared.mkdir()
        db = _traces(shared / "traces.sqlite", mode)
        db.chmod(0o444)
        shared.chmod(0o555)
        cases[mode] = (shared, db, base / "report.html")
    try:
        args = [str(a) for _, db, report in cases.values() for a in (db, report)]
        proc = subprocess.run([*prefix, sys.executable, "-c", READ_ALL, *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        outcomes = json.loads(proc.stdout.splitlines()[-1])
        yield {mode: (shared, report, outcomes[str(db)]) for mode, (shared, db, report) in cases.items()}
    finally:
        for shared, _, _ in cases.values():
            shared.chmod(0o755)


@pytest.mark.parametrize("journal_mode", JOURNAL_MODES)
def test_read_commands_read_a_database_in_a_folder_they_cannot_write(read_in_unwritable_folders, journal_mode):
    """A WAL database there cannot even be opened read-only (SQLite would create its -shm index): it is read
    as immutable. The commands run in a subprocess with the permissions enforced."""
    shared, report, outcome = read_in_unwritable_folders[journal_mode]
    assert outcome == "ok", outcome
    assert report.is_file()
    assert sorted(p.name for p in shared.iterdir()) == ["traces.sqlite"]


def test_a_damaged_trace_database_is_one_error_line_not_a_traceback(tmp_path, monkeypatch, capsys):
    """A file whose header and schema read but whose data pages are damaged (copied while a run wrote it, a bad
    disk) failed only when the runs were read, after the file was opened: `raa runs`, `raa trace`, `raa report`
    and `raa prune --dry-run` ended in sqlite3.DatabaseError's traceback instead of the error naming the file."""
    db = tmp_path / "traces.sqlite"
    saver = open_saver(db)
    for k in range(20):
        _graph(saver).invoke({"video": f"/clips/{k}.mp4" * 50}, {"configurable": {"thread_id": f"run-{k}"}})
    saver.conn.close()
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page:] = b"\xff" * (len(data) - page)  # every page but the first (the schema)
    db.write_bytes(bytes(data))
    monkeypatch.setenv("RAA_TRACES_PATH", str(db))
    for args in (["runs"], ["trace", "run-3"], ["report", "run-3", "--out", str(tmp_path / "r.html")],
                 ["prune", "--keep", "1", "--dry-run"]):
        with pytest.raises(SystemExit) as info:
            from graph.cli import app as raa

            raa(args, prog_name="raa")
        err = capsys.readouterr().err
        assert info.value.code == 2, (args, err)
        assert err.startswith(f"error: trace database {db} cannot be read") and "malformed" in err, (args, err)
