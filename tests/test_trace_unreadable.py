"""A run whose checkpoint cannot be decoded (a damaged page, a serializer another program or version wrote) is
one unreadable run, not a broken trace database: `raa runs` lists the others and names it, `raa trace` on it
is one error line (exit 2), and `read_trace` raises `UnreadableRunError` (a StoreError) naming the run."""

from __future__ import annotations

import sqlite3

import pytest
from typer.testing import CliRunner

from graph.cli import app
from tests.test_tracing import _graph

runner = CliRunner()


def _database_with_a_damaged_run(tmp_path):
    from graph.tracing import open_saver

    db = tmp_path / "traces.sqlite"
    for rid in ("run-good1", "run-bad", "run-good2"):
        _graph(open_saver(db)).invoke({"video": f"/clips/{rid}.mp4", "instruction": "x"},
                                      {"configurable": {"thread_id": rid}})
    conn = sqlite3.connect(db)
    conn.execute("UPDATE checkpoints SET checkpoint = ? WHERE thread_id = 'run-bad'", (b"\xc1\xc1damaged",))
    conn.commit()
    conn.close()
    return db


def test_read_trace_of_a_damaged_run_names_it(tmp_path) -> None:
    from graph.stores import StoreError
    from graph.tracing import UnreadableRunError, open_saver, read_trace

    db = _database_with_a_damaged_run(tmp_path)
    saver = open_saver(db, read_only=True)
    with pytest.raises(UnreadableRunError, match=r"run 'run-bad' in trace database .* cannot be read") as info:
        read_trace(saver, "run-bad")
    assert isinstance(info.value, StoreError)
    assert read_trace(saver, "run-good1").status == "scored"


def test_runs_lists_the_readable_runs_and_names_the_damaged_one(monkeypatch, tmp_path) -> None:
    db = _database_with_a_damaged_run(tmp_path)
    monkeypatch.setenv("RAA_TRACES_PATH", str(db))
    res = runner.invoke(app, ["runs"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "run-good1" in res.output and "run-good2" in res.output
    assert "1 run(s) could not be read: run-bad" in res.output
    res = runner.invoke(app, ["runs", "--json"])
    assert res.exit_code == 0, res.output
    assert sum(line.startswith("{") for line in res.output.splitlines()) == 2


def test_trace_of_a_damaged_run_is_one_error_line(monkeypatch, tmp_path) -> None:
    db = _database_with_a_damaged_run(tmp_path)
    monkeypatch.setenv("RAA_TRACES_PATH", str(db))
    res = runner.invoke(app, ["trace", "run-bad"])
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert "error: run 'run-bad' in trace database" in res.output and "Traceback" not in res.output


def test_report_of_a_damaged_run_is_one_error_line(monkeypatch, tmp_path) -> None:
    """`raa report RUN_ID` on a run whose checkpoint cannot be decoded: one error line, no traceback."""
    db = _database_with_a_damaged_run(tmp_path)
    monkeypatch.setenv("RAA_TRACES_PATH", str(db))
    res = runner.invoke(app, ["report", "run-bad", "--out", str(tmp_path / "bad.html")])
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert "error: run 'run-bad' in trace database" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "bad.html").exists()


def test_eval_index_links_the_readable_runs_and_counts_the_damaged_one(tmp_path) -> None:
    """`raa eval report`: a damaged run of the evaluation does not stop the index or the other run reports."""
    import json

    from evals.report_index import write_eval_index

    db = _database_with_a_damaged_run(tmp_path)
    out = tmp_path / "eval"
    out.mkdir()
    rows = [{"path": f"/clips/{rid}.mp4", "preset": "full", "instruction": "x", "label": "ordinary",
             "pattern": "success", "reward": 0.5, "status": "scored", "run_id": rid, "judge": None}
            for rid in ("run-good1", "run-bad", "run-good2")]
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    index = write_eval_index(out, traces_path=db).read_text()
    assert sorted(p.name for p in (out / "reports").iterdir()) == ["run-good1.html", "run-good2.html"]
    assert "2 run reports linked; 1 run could not be read (run-bad)" in index
