"""A run started on the compiled agent itself (`agent.invoke` / `ainvoke` / `stream`, the graph from
`build_reward_agent` with a SQLite trace database) claims its run id in the trace file as `score_video` runs do
(`graph.run_claims`, claimed by `graph.thread_guard.RewardAgent`): it wrote none, so such a run killed mid-way
(durability "exit": no checkpoint yet) was "no traced run" to `raa trace` and missing from `raa runs`, a live one
was not spared by `raa prune`, and a second process could run the same thread id at once."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graph.cli import app
from tests.graph_scripts import PUSH, FakeSurprise, full_script

CHILD = """
import os, sys
sys.path.insert(0, {tests!r})
from graph_scripts import FakeSurprise, full_script
from graph import AgentConfig, AgentTools, build_reward_agent
from graph.backbone import Backbone
from graph.builder import default_checkpointer
from graph.testing import ScriptedChatModel
from tools.motion import LKTracker

def killed(messages, k):
    os._exit(3)

backbone = Backbone(ScriptedChatModel(full_script(assess=killed)), schema_retries=1, max_retries=1, timeout_s=30,
                    retry_wait=(0.0, 0.0))
agent = build_reward_agent(AgentConfig(preset="decomposed"), backbone=backbone, checkpointer=default_checkpointer({db!r}),
                           tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()))
agent.invoke({{"video": {clip!r}, "instruction": "push the red block to the right", "run_id": "plain"}},
             {{"configurable": {{"thread_id": "plain"}}}}, durability="exit")
"""


def _claims(db) -> list[str]:
    conn = sqlite3.connect(str(db))
    try:
        return [row[0] for row in conn.execute("SELECT thread_id FROM raa_run_claims")]
    except sqlite3.OperationalError:  # no claim was ever written
        return []
    finally:
        conn.close()


def claimed_by_parent(db, run_id: str) -> None:
    """`run_id` claimed in the trace database `db` by a live process of this host (the test runner's parent)."""
    import socket

    conn = sqlite3.connect(str(db))
    conn.execute("CREATE TABLE IF NOT EXISTS raa_run_claims (thread_id TEXT PRIMARY KEY, host TEXT NOT NULL, "
                 "pid INTEGER NOT NULL, claimed TEXT NOT NULL)")
    conn.execute("INSERT INTO raa_run_claims VALUES (?, ?, ?, '2030-01-01T00:00:00+00:00')",
                 (run_id, socket.gethostname(), os.getppid()))
    conn.commit()
    conn.close()


def _agent(db, checkpointer=None, **script):
    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.builder import default_checkpointer
    from graph.testing import ScriptedChatModel
    from tools.motion import LKTracker

    backbone = Backbone(ScriptedChatModel(full_script(**script)), schema_retries=1, max_retries=1, timeout_s=10,
                        retry_wait=(0.0, 0.0))
    return build_reward_agent(AgentConfig(preset="decomposed"), backbone=backbone, checkpointer=checkpointer or default_checkpointer(db),
                              tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()))


def test_a_plain_invoke_killed_mid_run_is_listed_as_died(clip, tmp_path) -> None:
    db = str(tmp_path / "traces.sqlite")
    code = CHILD.format(tests=str(Path(__file__).parent), db=db, clip=str(clip))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), *sys.path])}
    child = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert child.returncode == 3, child.stderr[-2000:]
    res = CliRunner().invoke(app, ["runs", "--db", db, "--json"])
    rows = [json.loads(line) for line in res.output.splitlines()]
    assert [(r["run_id"], r["status"]) for r in rows] == [("plain", "died")], res.output
    out = CliRunner().invoke(app, ["trace", "plain", "--db", db]).output
    assert "died" in out and "ended before its trace was saved" in out, out


@pytest.mark.parametrize("call", ["invoke", "ainvoke", "stream"])
def test_a_plain_run_holds_a_claim_while_it_runs_and_releases_it(clip, tmp_path, call) -> None:
    db = tmp_path / "traces.sqlite"
    seen: list[list[str]] = []

    def assess(messages, k):
        from tests.graph_scripts import assessment

        seen.append(_claims(db))
        return assessment()

    agent = _agent(db, assess=assess)
    inputs, config = {"video": str(clip), "instruction": PUSH, "run_id": "p1"}, {"configurable": {"thread_id": "p1"}}
    if call == "invoke":
        agent.invoke(inputs, config)
    elif call == "ainvoke":
        asyncio.run(agent.ainvoke(inputs, config))
    else:
        list(agent.stream(inputs, config))
    assert seen == [["p1"]], seen
    assert _claims(db) == []
    assert agent.get_state(config).values["result"].status == "scored"


def test_a_plain_run_of_an_id_another_process_runs_is_refused(clip, tmp_path) -> None:
    """The id is claimed by a live process (here: this test's parent): the run is refused before it writes."""
    from graph.thread_claims import RunIdClaimed

    db = tmp_path / "traces.sqlite"
    agent = _agent(db)
    claimed_by_parent(db, "busy")
    config = {"configurable": {"thread_id": "busy"}}
    with pytest.raises(RunIdClaimed, match=f"process {os.getppid()} on"):
        agent.invoke({"video": str(clip), "instruction": PUSH}, config)
    assert agent.get_state(config).values == {}
    assert _claims(db) == ["busy"]


def test_a_plain_run_ages_another_hosts_claim_as_its_settings_say(clip, tmp_path) -> None:
    """The agent carries the settings' claim age (RAA_FOREIGN_CLAIM_MAX_AGE_S) into its own runs' claims."""
    import datetime as dt

    from test_claim_age_setting import _foreign_claims

    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.builder import default_checkpointer
    from graph.settings import BackboneSettings
    from graph.testing import ScriptedChatModel
    from graph.thread_claims import RunIdClaimed
    from tools.motion import LKTracker

    db = tmp_path / "traces.sqlite"
    backbone = Backbone(ScriptedChatModel(full_script()), schema_retries=1, max_retries=1, timeout_s=10,
                        retry_wait=(0.0, 0.0))
    agent = build_reward_agent(AgentConfig(preset="decomposed"), backbone=backbone,
                               checkpointer=default_checkpointer(db), tools=AgentTools(tracker=LKTracker(),
                                                                                       surprise=FakeSurprise()),
                               settings=BackboneSettings.from_env({"RAA_FOREIGN_CLAIM_MAX_AGE_S": "300"}))
    _foreign_claims(db, [("old", dt.timedelta(minutes=10)), ("young", dt.timedelta(minutes=1))])
    out = agent.invoke({"video": str(clip), "instruction": PUSH}, {"configurable": {"thread_id": "old"}})
    assert out["result"].status == "scored", out["result"].reasons
    with pytest.raises(RunIdClaimed, match="crashed-node-17"):
        agent.invoke({"video": str(clip), "instruction": PUSH}, {"configurable": {"thread_id": "young"}})


def test_a_run_in_flight_with_steps_saved_reads_running_not_incomplete(clip, tmp_path) -> None:
    """With a checkpoint per step (durability "async", LangGraph's default for `agent.invoke`) a run in flight read
    "incomplete" in `raa runs` / `raa trace`, as a crashed run does: its live claim now says it is running."""
    from graph.tracing import read_trace

    db = tmp_path / "traces.sqlite"
    seen: list[tuple] = []

    def assess(messages, k):
        from tests.graph_scripts import assessment

        trace = read_trace(open_saver_ro(db), "p2")
        rows = [json.loads(line) for line in CliRunner().invoke(app, ["runs", "--db", str(db), "--json"]).output
                .splitlines()]
        seen.append((trace.status, len(trace.steps), [(r["run_id"], r["status"]) for r in rows], trace.reasons))
        return assessment()

    agent = _agent(db, assess=assess)
    agent.invoke({"video": str(clip), "instruction": PUSH}, {"configurable": {"thread_id": "p2"}}, durability="sync")
    (status, steps, rows, reasons), = seen
    assert (status, rows) == ("running", [("p2", "running")]) and steps >= 1, seen
    assert "still running" in reasons[0], reasons
    after = read_trace(open_saver_ro(db), "p2")
    assert after.status == "scored" and after.reasons != reasons


def open_saver_ro(db):
    from graph.tracing import open_saver

    return open_saver(db, read_only=True)


def test_the_api_says_a_run_id_with_steps_saved_and_a_live_claim_is_running(clip, tmp_path) -> None:
    """A run of the id in flight in another process with its steps saved (durability "async") was refused as
    "already has a trace (an earlier run's)": the API's look-up of the thread now comes before the agent's claim,
    and must name the run that holds the id, as the claim did."""
    import socket

    from graph.api import arun_agent

    db = tmp_path / "traces.sqlite"
    agent = _agent(db)
    agent.invoke({"video": str(clip), "instruction": PUSH}, {"configurable": {"thread_id": "busy"}}, durability="sync")
    conn = sqlite3.connect(str(db))
    conn.execute("INSERT INTO raa_run_claims VALUES ('busy', ?, ?, '2030-01-01T00:00:00+00:00')",
                 (socket.gethostname(), os.getppid()))
    conn.commit()
    conn.close()
    refused = asyncio.run(arun_agent(agent, str(clip), PUSH, "busy", "decomposed"))
    assert refused.reward is None and f"already running in process {os.getppid()} on" in refused.reasons[0], refused
    done = asyncio.run(arun_agent(agent, str(clip), PUSH, "p3", "decomposed"))
    assert asyncio.run(arun_agent(agent, str(clip), PUSH, "p3", "decomposed")).reasons[0].startswith(
        "agent: settings: run id 'p3' already has a trace"), done


@pytest.mark.timeout(120)
def test_a_sync_run_on_an_async_trace_database_holds_a_claim(clip, tmp_path) -> None:
    """A sync run from a worker thread on an agent with an AsyncSqliteSaver (`await asyncio.to_thread(agent.invoke,
    ...)`; LangGraph runs the saver's sync calls on its event loop) wrote no claim: a run of the id another process
    ran was not refused, so both wrote one thread's trace, and the run read "incomplete" or "no traced run" while it
    ran. On the loop's own thread LangGraph refuses the sync call, as before (no wait on the loop for the file)."""

    from graph.thread_claims import RunIdClaimed
    from graph.trace_savers import open_async_saver
    from tests.graph_scripts import assessment

    db = tmp_path / "traces.sqlite"
    seen: list[list[str]] = []

    def assess(messages, k):
        seen.append(_claims(db))
        return assessment()

    async def main():
        async with open_async_saver(db) as saver:
            agent = _agent(db, saver, assess=assess)
            out = await asyncio.to_thread(agent.invoke, {"video": str(clip), "instruction": PUSH},
                                          {"configurable": {"thread_id": "a1"}})
            claimed_by_parent(db, "busy")
            with pytest.raises(RunIdClaimed, match=f"process {os.getppid()} on"):
                await asyncio.to_thread(agent.invoke, {"video": str(clip), "instruction": PUSH},
                                        {"configurable": {"thread_id": "busy"}})
            with pytest.raises(asyncio.InvalidStateError, match="only allowed from a different thread"):
                agent.invoke({"video": str(clip), "instruction": PUSH}, {"configurable": {"thread_id": "a2"}})
            return out

    out = asyncio.run(main())
    assert out["result"].status == "scored", out["result"].reasons
    assert seen == [["a1"]], seen
    assert _claims(db) == ["busy"]
