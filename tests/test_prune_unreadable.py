"""`raa prune --before/--status` with a run whose checkpoint cannot be decoded: the run cannot be judged by its
time or status, so it is spared and named, and the other runs are pruned. Before, the one damaged run stopped
every such prune with a StoreError (a daily `raa prune --before 7d --yes` never deleted anything again)."""

from __future__ import annotations

from typer.testing import CliRunner

from graph.cli import app
from graph.retention import select_runs
from graph.tracing import open_saver, run_ids
from tests.test_trace_unreadable import _database_with_a_damaged_run

runner = CliRunner()


def test_select_runs_spares_and_counts_a_damaged_run(tmp_path) -> None:
    db = _database_with_a_damaged_run(tmp_path)
    selection = select_runs(db, status="scored")
    assert sorted(selection.run_ids) == ["run-good1", "run-good2"]
    assert selection.unreadable == ["run-bad"] and selection.total == 3


def test_prune_before_deletes_the_readable_runs_and_names_the_damaged_one(tmp_path) -> None:
    db = _database_with_a_damaged_run(tmp_path)
    res = runner.invoke(app, ["prune", "--before", "0m", "--yes", "--db", str(db)])
    assert res.exit_code == 0, (res.output, res.exception)
    assert "2 of 3 runs" in res.output, res.output
    assert "1 run(s) could not be read and are spared: run-bad" in res.output, res.output
    saver = open_saver(db, read_only=True)
    assert list(run_ids(saver)) == ["run-bad"]
    saver.conn.close()


def test_prune_keep_still_deletes_a_damaged_run(tmp_path) -> None:
    """`--keep` alone needs no run's contents: the way out the unreadable-run error names."""
    db = _database_with_a_damaged_run(tmp_path)
    res = runner.invoke(app, ["prune", "--keep", "0", "--yes", "--db", str(db)])
    assert res.exit_code == 0, (res.output, res.exception)
    saver = open_saver(db, read_only=True)
    assert list(run_ids(saver)) == []
    saver.conn.close()
