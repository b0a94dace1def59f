"""`raa trace` of a finished run whose latest checkpoint is a time-travel fork not resumed yet (Studio,
`agent.update_state`): it read "status=incomplete" with no word of the fork, as if the run had crashed; the
result the run reached before the fork was not mentioned."""

from __future__ import annotations

from test_tracing import _graph
from typer.testing import CliRunner

from graph.cli import app
from graph.tracing import open_saver


def test_trace_of_a_pending_fork_says_the_run_finished_before_it(tmp_path):
    db = tmp_path / "traces.sqlite"
    graph = _graph(open_saver(db))
    config = {"configurable": {"thread_id": "run-f"}}
    graph.invoke({"video": "/clips/a.mp4", "instruction": "pick the cube"}, config)
    before_gate = next(h for h in graph.get_state_history(config) if h.next == ("gate",))
    graph.update_state(before_gate.config, {"video": "/clips/a.mp4"})
    res = CliRunner().invoke(app, ["trace", "run-f", "--db", str(db)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "status=incomplete" in res.output
    assert "time-travel fork" in res.output and "scored" in res.output.split("status=incomplete")[1]
    graph.invoke(None, config)  # resumed: the fork finished, no note
    res = CliRunner().invoke(app, ["trace", "run-f", "--db", str(db)], env={"COLUMNS": "200"})
    assert "status=scored" in res.output and "time-travel fork" not in res.output, res.output


def _fork_over_damaged_checkpoints(tmp_path):
    """A trace database holding run-d: a finished run, then a fork not resumed; every checkpoint but the fork
    damaged."""
    import sqlite3

    db = tmp_path / "traces.sqlite"
    graph = _graph(open_saver(db))
    config = {"configurable": {"thread_id": "run-d"}}
    graph.invoke({"video": "/clips/a.mp4", "instruction": "pick the cube"}, config)
    before_gate = next(h for h in graph.get_state_history(config) if h.next == ("gate",))
    fork = graph.update_state(before_gate.config, {"video": "/clips/a.mp4"})
    conn = sqlite3.connect(db)
    conn.execute("UPDATE checkpoints SET checkpoint = ? WHERE thread_id = 'run-d' AND checkpoint_id != ?",
                 (b"\xc1\xc1damaged", fork["configurable"]["checkpoint_id"]))
    conn.commit()
    conn.close()
    return db


def test_trace_of_a_pending_fork_whose_earlier_checkpoints_are_damaged_still_prints(tmp_path):
    """The note reads the run's older checkpoints: one that cannot be decoded leaves the note out, not a traceback."""
    db = _fork_over_damaged_checkpoints(tmp_path)
    res = CliRunner().invoke(app, ["trace", "run-d", "--db", str(db)], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and res.exception is None, res.output
    assert "status=incomplete" in res.output and "time-travel fork" not in res.output


def test_prune_by_status_spares_and_names_a_run_whose_older_checkpoints_are_damaged(tmp_path):
    """`prune --status incomplete` reads a forked run's older checkpoints (`ever_finished`): a damaged one stopped
    the whole prune with the serializer's bare message ("error: invalid type Reserved"), instead of sparing and
    naming the run as it does a run whose latest checkpoint is damaged."""
    db = _fork_over_damaged_checkpoints(tmp_path)
    res = CliRunner().invoke(app, ["prune", "--db", str(db), "--status", "incomplete", "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "0 of 1 runs" in res.output and "could not be read and are spared: run-d" in res.output
