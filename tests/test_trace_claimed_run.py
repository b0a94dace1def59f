"""`raa trace RUN_ID` of a run that has a claim in the trace database but no checkpoint yet: with the default
durability ("exit") a run writes its trace only when it ends, so a run in flight, or one whose process was killed
mid-way, was "no traced run with id ..." as if the id were mistyped. The error now says which it is."""

from __future__ import annotations

import json
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


def _dead_claim(db, run_id: str) -> None:
    assert _claim(str(db), run_id) is None
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE {CLAIMS_TABLE} SET pid = ? WHERE thread_id = ?", (int(dead.stdout), run_id))


def test_runs_lists_runs_in_flight_and_those_that_died_unsaved(tmp_path) -> None:
    """`raa runs` listed only runs with a checkpoint: a run in flight (durability "exit" writes its trace when it
    ends) or one killed mid-way was missing from the list, though `raa trace` explained it."""
    db = tmp_path / "traces.sqlite"
    open_saver(db).conn.close()
    assert _claim(str(db), "run-live") is None  # this process runs it
    _dead_claim(db, "run-dead")
    res = CliRunner().invoke(app, ["runs", "--db", str(db), "--json"])
    assert res.exit_code == 0, res.output
    rows = {r["run_id"]: r for r in map(json.loads, res.output.splitlines())}
    assert (rows["run-live"]["status"], rows["run-dead"]["status"]) == ("running", "died"), rows
    assert "ended before its trace was saved" in rows["run-dead"]["reasons"][0], rows
    res = CliRunner().invoke(app, ["runs", "--db", str(db), "--status", "died", "--json"])
    assert res.exit_code == 0 and [json.loads(r)["run_id"] for r in res.output.splitlines()] == ["run-dead"], \
        res.output
    table = CliRunner().invoke(app, ["runs", "--db", str(db)], env={"COLUMNS": "200"}).output
    assert "run-live" in table and "running" in table and "died" in table, table


def test_runs_does_not_list_a_claimed_run_twice_once_it_has_a_checkpoint(tmp_path, clip) -> None:
    from graph_scripts import FakeSurprise, full_script, run

    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.builder import default_checkpointer
    from graph.testing import ScriptedChatModel
    from tools.motion import LKTracker

    db = tmp_path / "traces.sqlite"
    backbone = Backbone(ScriptedChatModel(full_script()), schema_retries=1, max_retries=1, timeout_s=10,
                        retry_wait=(0.0, 0.0))
    agent = build_reward_agent(AgentConfig(preset="full"), backbone=backbone, checkpointer=default_checkpointer(
        str(db)), tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()))
    run(agent, clip, run_id="r1")
    _dead_claim(db, "r1")  # a claim left beside a checkpoint (an async-durability crash) is the checkpoint's run
    res = CliRunner().invoke(app, ["runs", "--db", str(db), "--json"])
    assert [json.loads(r)["run_id"] for r in res.output.splitlines()] == ["r1"], res.output
    assert json.loads(res.output)["status"] != "died", res.output
    _dead_claim(db, "run-old")  # a run that died long ago sorts by its claim's time, not above every traced run
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE {CLAIMS_TABLE} SET claimed = '2000-01-01T00:00:00+00:00' WHERE thread_id = 'run-old'")
    res = CliRunner().invoke(app, ["runs", "--db", str(db), "--json"])
    assert [json.loads(r)["run_id"] for r in res.output.splitlines()] == ["r1", "run-old"], res.output
    res = CliRunner().invoke(app, ["runs", "--db", str(db), "--json", "--limit", "1"])
    assert [json.loads(r)["run_id"] for r in res.output.splitlines()] == ["r1"], res.output


def test_runs_and_trace_give_a_claimed_run_the_same_reason(tmp_path) -> None:
    """`raa runs` and `raa trace` each wrote their own wording of why a claimed run has no trace: the reason the
    list shows is the one `raa trace RUN_ID` gives (one writer, `graph.tracing.claimed_run`)."""
    db = tmp_path / "traces.sqlite"
    open_saver(db).conn.close()
    assert _claim(str(db), "run-live") is None
    _dead_claim(db, "run-dead")
    res = CliRunner().invoke(app, ["runs", "--db", str(db), "--json"])
    rows = {r["run_id"]: r for r in map(json.loads, res.output.splitlines())}
    for run_id in ("run-live", "run-dead"):
        out = " ".join(_trace(db, run_id).split())
        assert rows[run_id]["reasons"][0] in out and rows[run_id]["status"] in out, (rows[run_id], out)


def test_runs_and_trace_age_another_hosts_claim_of_a_run_with_steps_saved_alike(tmp_path, monkeypatch) -> None:
    """A run with steps saved and no result, claimed by another host 10 minutes ago, with
    RAA_FOREIGN_CLAIM_MAX_AGE_S=300: the claim is stale, so the run is "incomplete" (a crashed host's). `raa trace`
    said so, but `raa runs` read its traced runs with the 6 h default and listed it "running"."""
    import datetime as dt

    from langgraph.graph import END, START, StateGraph
    from test_claim_age_setting import _foreign_claims

    from graph.state import AgentState

    db = tmp_path / "traces.sqlite"
    g = StateGraph(AgentState)
    g.add_node("quality", lambda state: {"steps": [{"node": "quality", "decision": "usable"}]})
    g.add_edge(START, "quality")
    g.add_edge("quality", END)
    g.compile(checkpointer=open_saver(db)).invoke({"video": "clip.mp4"}, {"configurable": {"thread_id": "half"}})
    _foreign_claims(db, [("half", dt.timedelta(minutes=10))])
    monkeypatch.setenv("RAA_FOREIGN_CLAIM_MAX_AGE_S", "300")
    trace = CliRunner().invoke(app, ["trace", "half", "--db", str(db)])
    assert "status=incomplete" in trace.output, trace.output
    res = CliRunner().invoke(app, ["runs", "--db", str(db), "--json"])
    assert [(r["run_id"], r["status"]) for r in map(json.loads, res.output.splitlines())] == [("half", "incomplete")]
    monkeypatch.setenv("RAA_FOREIGN_CLAIM_MAX_AGE_S", "3600")  # younger than that: its host may still run it
    res = CliRunner().invoke(app, ["runs", "--db", str(db), "--json"])
    assert [(r["run_id"], r["status"]) for r in map(json.loads, res.output.splitlines())] == [("half", "running")]
