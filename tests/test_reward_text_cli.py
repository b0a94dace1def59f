"""Rewards on the console (`raa score`, `raa runs`, `raa trace`) follow the shared display rule
(`graph.reward_format.reward_text`, also used by the eval reports and the judge): 3 decimals, and a positive
reward that would round to zero in scientific notation, so a scored 0.00004 never reads "0.0000" beside its
"scored" status."""

from __future__ import annotations

from rich.console import Console
from typer.testing import CliRunner

from graph.cli import app
from graph.schemas import RewardResult
from tests.test_tracing import _graph

runner = CliRunner()
TINY = RewardResult(reward=0.00004, status="scored", T=0.1, P=0.1, V=0.1, run_id="run-tiny", preset="full")


def test_reward_text_rule() -> None:
    from graph.reward_format import reward_text

    assert [reward_text(v) for v in (None, 0.0, 0.62, 1.0, 0.00004)] == ["-", "0.000", "0.620", "1.000", "4.00e-05"]


def test_runs_and_trace_show_a_tiny_scored_reward_as_positive(monkeypatch, tmp_path) -> None:
    from graph.tracing import open_saver

    db = tmp_path / "traces.sqlite"
    _graph(open_saver(db), result=TINY).invoke({"video": "/clips/t.mp4"}, {"configurable": {"thread_id": "run-tiny"}})
    monkeypatch.setenv("RAA_TRACES_PATH", str(db))
    out = runner.invoke(app, ["runs"], env={"COLUMNS": "200"}).output
    assert "4.00e-05" in out and "0.0000" not in out, out
    out = runner.invoke(app, ["trace", "run-tiny"], env={"COLUMNS": "250"}).output
    assert "reward=4.00e-05" in out, out


def test_score_table_shows_a_tiny_scored_reward_as_positive() -> None:
    from graph.commands import _result_table

    console = Console(width=120, record=True)
    console.print(_result_table(TINY))
    out = console.export_text()
    assert "4.00e-05" in out and "0.0000" not in out, out


def test_trace_decisions_show_a_tiny_direct_reward_as_positive(clip) -> None:
    """The direct and gate steps' decisions (`raa trace`'s decision column) follow the same rule: the gate's
    read "scored: R = 0.0000" and direct's "direct reward 0.000" for a scored 0.00004."""
    from graph_scripts import full_script, make_agent, nodes, run

    agent, _ = make_agent("direct", full_script(direct=[{"reward": 0.00004, "rationale": "barely"}]))
    out = run(agent, clip)
    assert out["result"].status == "scored" and nodes(out)[-2:] == ["direct", "gate"]
    decisions = {s["node"]: s["decision"] for s in out["steps"]}
    assert decisions["direct"] == "direct reward 4.00e-05" and decisions["gate"] == "scored: R = 4.00e-05", decisions
