"""`raa prune --vacuum` of a trace database that holds no runs' tables yet (an empty file): the vacuum's fence
(`graph.run_claims.fence_vacuum`) wrote its own table into it, after which every command, scoring included,
refused the file as "another database" (it holds other tables (raa_vacuums)). Nothing is written there now."""

from __future__ import annotations

import sqlite3

import pytest
from typer.testing import CliRunner

from graph.cli import app
from graph.tracing import open_saver

runner = CliRunner()


@pytest.mark.parametrize("args", [["--vacuum"], ["--keep", "1", "--vacuum", "--yes"]])
def test_vacuum_of_an_empty_trace_database_leaves_it_usable(tmp_path, args) -> None:
    db = tmp_path / "traces.sqlite"
    db.touch()
    res = runner.invoke(app, ["prune", *args, "--db", str(db)], env={"RAA_CACHE_PATH": "off"})
    assert res.exit_code == 0, (res.output, res.exception)
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall() == []
    conn.close()
    res = runner.invoke(app, ["runs", "--db", str(db)])
    assert res.exit_code == 0 and "no runs in" in res.output, (res.output, res.exception)
    open_saver(db).conn.close()  # a run can still store its trace there
