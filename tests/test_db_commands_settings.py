"""`raa runs`, `raa trace` and `raa prune` read only the settings they use: an unrelated bad `RAA_*` value (the
backbone's) made them exit 2 even with `--db` given."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from graph.cli import app
from tests.test_tracing import _graph

runner = CliRunner()
BAD = {"RAA_MAX_RETRIES": "abc", "RAA_TIMEOUT_S": "soon", "RAA_INSPECT_MODE": "telepathy", "COLUMNS": "200"}


@pytest.fixture()
def db(tmp_path):
    from graph.tracing import open_saver

    path = tmp_path / "traces.sqlite"
    _graph(open_saver(path)).invoke({"video": "/clips/a.mp4", "instruction": "pick the cube"},
                                    {"configurable": {"thread_id": "run-aaa"}})
    return path


def test_runs_and_trace_with_db_ignore_the_backbone_settings(db):
    res = runner.invoke(app, ["runs", "--db", str(db)], env=BAD)
    assert res.exit_code == 0, res.output
    assert "run-aaa" in res.output
    res = runner.invoke(app, ["trace", "run-aaa", "--db", str(db)], env=BAD)
    assert res.exit_code == 0, res.output
    assert "pick the cube" in res.output


def test_runs_without_db_read_only_the_trace_path(db):
    res = runner.invoke(app, ["runs"], env={**BAD, "RAA_TRACES_PATH": str(db)})
    assert res.exit_code == 0, res.output
    assert "run-aaa" in res.output
    res = runner.invoke(app, ["runs"], env={**BAD, "RAA_TRACES_PATH": "off"})  # a setting it uses is still checked
    assert res.exit_code == 2 and "RAA_TRACES_PATH" in res.output


def test_prune_with_db_ignores_the_backbone_settings(db, tmp_path):
    env = {**BAD, "RAA_CACHE_PATH": str(tmp_path / "cache.sqlite")}
    res = runner.invoke(app, ["prune", "--db", str(db), "--keep", "0", "--dry-run"], env=env)
    assert res.exit_code == 0, res.output
    assert "1 of 1 runs" in res.output and "run-aaa" in res.output
    res = runner.invoke(app, ["prune", "--db", str(db), "--keep", "0", "--yes"], env=env)
    assert res.exit_code == 0, res.output
    assert "deleted 1 runs" in res.output


def test_prune_still_refuses_a_bad_value_of_a_setting_it_uses(db):
    res = runner.invoke(app, ["prune", "--db", str(db), "--keep", "0", "--dry-run"],
                        env={**BAD, "RAA_FOREIGN_CLAIM_MAX_AGE_S": "0"})
    assert res.exit_code == 2 and "RAA_FOREIGN_CLAIM_MAX_AGE_S" in res.output, res.output


def test_report_commands_read_only_the_trace_path(db, tmp_path):
    """`raa report` and `raa eval report` read the trace database like `raa trace`: a bad backbone setting made
    them exit 2 before reading it."""
    env = {**BAD, "RAA_TRACES_PATH": str(db)}
    res = runner.invoke(app, ["report", "run-aaa", "--out", str(tmp_path / "a.html")], env=env)
    assert res.exit_code == 0, res.output
    assert (tmp_path / "a.html").is_file()
    (tmp_path / "eval").mkdir()
    res = runner.invoke(app, ["eval", "report", str(tmp_path / "eval")], env=env)
    assert "RAA_MAX_RETRIES" not in res.output, res.output
    res = runner.invoke(app, ["report", "run-aaa"], env={**BAD, "RAA_TRACES_PATH": "off"})  # its own setting: checked
    assert res.exit_code == 2 and "RAA_TRACES_PATH" in res.output, res.output
