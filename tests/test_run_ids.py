"""Run ids (checkpoint thread ids): a reused id is refused with a reason, never mixed into another run's trace."""

from __future__ import annotations

import os

import pytest
from graph_scripts import FakeSurprise, full_script, make_agent, moving_square, run

INSTRUCTION = "push the red block to the right"


def test_reused_run_id_is_refused_with_a_reason(clip):
    import asyncio

    from graph import AgentConfig, ascore_videos

    agent, _ = make_agent("decomposed")
    items = [{"video": str(clip), "instruction": INSTRUCTION, "run_id": "same"}]
    first = asyncio.run(ascore_videos(items, AgentConfig(preset="decomposed"), agent=agent))[0]
    second = asyncio.run(ascore_videos(items, AgentConfig(preset="decomposed"), agent=agent))[0]
    assert first.status == "scored"
    assert second.reward is None and "already has a trace" in second.reasons[0]
    third = asyncio.run(ascore_videos(items, agent=agent))[0]  # no config: the refusal says the agent's preset
    assert "already has a trace" in third.reasons[0] and third.preset == first.preset == "decomposed"


@pytest.mark.parametrize("preset", ["full", "direct"])
def test_second_input_on_a_used_thread_is_refused(clip, preset):
    """The graph used directly (agent.invoke with the same thread id, a reused Studio thread): the earlier run's
    channels would carry over (the frozen contract raised; in direct, an earlier fault skipped every stage), and
    the new input would replace the earlier run's values (`graph.thread_guard`)."""
    from graph.thread_guard import ThreadInUseError

    script = full_script(direct=[{"reward": 2.0, "rationale": "out of range"}] * 2 + [{"reward": 0.8, "rationale": "ok"}])
    agent, model = make_agent(preset, script)
    first = run(agent, clip, run_id="same")["result"]
    calls = len(model.calls)
    assert first.status == ("scored" if preset == "full" else "ineligible")
    with pytest.raises(ThreadInUseError, match=f"thread 'same' already holds a run .*{first.status}"):
        run(agent, clip, run_id="same")
    assert len(model.calls) == calls  # nothing re-run on the stale state
    assert agent.get_state({"configurable": {"thread_id": "same"}}).values["result"] == first


def test_a_run_id_named_twice_in_one_batch_is_refused_not_overwritten(clip, tmp_path):
    """Both items passed the 'already has a trace' check (neither trace existed yet) and the second trace
    overwrote the first: `raa trace dup` then explained the first result with the other clip."""
    import asyncio

    from graph import AgentConfig, ascore_videos

    other = moving_square(tmp_path / "other.mp4", seed=3)
    agent, _ = make_agent("decomposed")
    items = [{"video": str(clip), "instruction": INSTRUCTION, "run_id": "dup"},
             {"video": str(other), "instruction": INSTRUCTION, "run_id": "dup"}]
    first, second = asyncio.run(ascore_videos(items, AgentConfig(preset="decomposed"), agent=agent))
    assert first.status == "scored" and second.reward is None
    assert "run id 'dup' is already running" in second.reasons[0]
    assert "refused" in second.reasons[0] and "another run in this process holds it" in second.reasons[0]
    assert second.run_id == ""  # the refusal has no trace: 'dup' names the other run's, which `raa trace` shows
    assert agent.get_state({"configurable": {"thread_id": "dup"}}).values["video"] == str(clip)


def test_a_run_id_that_is_not_a_string_is_refused_before_any_run(clip):
    """An int run id (a dataframe index) ran every clip of the group, then the pydantic error of the one
    RewardResult that carried it escaped `ascore_videos` and every other item's result was lost."""
    import asyncio

    from graph import AgentConfig, ascore_videos

    agent, model = make_agent("decomposed")
    items = [(str(clip), INSTRUCTION), {"video": str(clip), "instruction": INSTRUCTION, "run_id": 7}]
    with pytest.raises(TypeError, match="run_id must be a str, got int"):
        asyncio.run(ascore_videos(items, AgentConfig(preset="decomposed"), agent=agent))
    assert model.calls == []  # refused at once, like a video or instruction of the wrong type
    from graph import score_video
    from graph.testing import ScriptedChatModel

    single = ScriptedChatModel(full_script())
    with pytest.raises(TypeError, match="run_id must be a str, got int"):  # score_video: before the run, too
        score_video(str(clip), INSTRUCTION, AgentConfig(preset="decomposed"), model=single, run_id=7)
    assert single.calls == []


def _agent_on(db, delay_s: float = 0.0):
    """A scripted agent whose checkpointer is its own connection to the trace file `db`, as another process's."""
    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.builder import default_checkpointer
    from graph.testing import ScriptedChatModel
    from tools.motion import LKTracker

    backbone = Backbone(ScriptedChatModel(full_script(), delay_s=delay_s), schema_retries=1, max_retries=1,
                        timeout_s=10, retry_wait=(0.0, 0.0))
    return build_reward_agent(AgentConfig(preset="decomposed"), backbone=backbone,
                              tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()),
                              checkpointer=default_checkpointer(db))


def _claims(db) -> list[tuple]:
    import sqlite3

    conn = sqlite3.connect(str(db))
    try:
        return conn.execute("SELECT thread_id, pid FROM raa_run_claims").fetchall()
    finally:
        conn.close()


def test_one_run_id_on_two_connections_to_one_trace_file_is_refused_not_overwritten(clip, tmp_path):
    """Two processes sharing a trace file: with durability "exit" neither run's checkpoint existed until it
    ended, both ran, and the later trace replaced the earlier. The id is now claimed in the file itself."""
    import asyncio

    from graph.api import arun_agent

    db = tmp_path / "traces.sqlite"
    other = moving_square(tmp_path / "other.mp4", seed=3)
    first, second = _agent_on(db, delay_s=0.05), _agent_on(db, delay_s=0.05)

    async def both():
        return await asyncio.gather(arun_agent(first, str(clip), INSTRUCTION, "same", "decomposed"),
                                    arun_agent(second, str(other), INSTRUCTION, "same", "decomposed"))

    results = asyncio.run(both())
    assert sorted(r.status for r in results) == ["ineligible", "scored"]
    refused = next(r for r in results if r.status == "ineligible")
    assert "run id 'same' is already running in process" in refused.reasons[0]
    assert "refused" in refused.reasons[0] and "holds it" in refused.reasons[0] and refused.run_id == ""
    winner = str(clip) if results[0].status == "scored" else str(other)
    assert first.get_state({"configurable": {"thread_id": "same"}}).values["video"] == winner
    assert _claims(db) == []  # released once the run ended


def test_a_claim_of_a_live_process_refuses_and_a_dead_ones_is_taken_over(clip, tmp_path):
    import asyncio
    import os
    import socket
    import sqlite3
    import subprocess

    from graph.api import arun_agent

    db = tmp_path / "traces.sqlite"
    agent = _agent_on(db)
    gone = subprocess.Popen(["true"])
    gone.wait()
    conn = sqlite3.connect(str(db))
    conn.execute("CREATE TABLE raa_run_claims (thread_id TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL, "
                 "claimed TEXT NOT NULL)")
    conn.executemany("INSERT INTO raa_run_claims VALUES (?, ?, ?, '2030-01-01T00:00:00+00:00')",
                     [("live", socket.gethostname(), os.getppid()), ("stale", socket.gethostname(), gone.pid)])
    conn.commit()
    conn.close()
    live = asyncio.run(arun_agent(agent, str(clip), INSTRUCTION, "live", "decomposed"))
    assert live.reward is None and f"already running in process {os.getppid()} on" in live.reasons[0]
    assert asyncio.run(arun_agent(agent, str(clip), INSTRUCTION, "stale", "decomposed")).status == "scored"
    assert _claims(db) == [("live", os.getppid())]


def _gate_claims(monkeypatch, after=None):
    """Hold every claim write of `graph.run_claims` in its worker thread until the returned `gate` is set
    (`started` is set once one waits); `after` runs in that thread once the real write is done."""
    import threading

    from graph import run_claims

    started, gate, real = threading.Event(), threading.Event(), run_claims._claim

    def held(file, run_id, max_age_s):
        started.set()
        gate.wait()
        holder = real(file, run_id, max_age_s)
        if after is not None:
            after()
        return holder

    monkeypatch.setattr(run_claims, "_claim", held)
    return started, gate


def test_a_run_cancelled_while_its_id_is_claimed_leaves_no_claim(clip, tmp_path, monkeypatch):
    """The claim's write went on in its thread after the cancellation, and nobody released it: the run id was
    refused as "already running" in this very process until it exited (a trainer, the reward service)."""
    import asyncio

    from graph.api import arun_agent

    db = tmp_path / "traces.sqlite"
    agent = _agent_on(db)
    started, gate = _gate_claims(monkeypatch)

    async def cancelled_mid_claim():
        task = asyncio.ensure_future(arun_agent(agent, str(clip), INSTRUCTION, "cut", "decomposed"))
        await asyncio.to_thread(started.wait)
        task.cancel()
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled_mid_claim())  # its end waits for the loop's worker threads: the claim's write is done
    assert _claims(db) == []
    monkeypatch.undo()
    assert asyncio.run(arun_agent(agent, str(clip), INSTRUCTION, "cut", "decomposed")).status == "scored"


def test_a_claim_written_just_before_its_cancellation_arrives_is_released(tmp_path, monkeypatch):
    """The write had committed and its result was on its way to the task when the task was cancelled."""
    import asyncio
    import sqlite3
    import threading

    from graph import run_claims

    db = str(tmp_path / "traces.sqlite")
    sqlite3.connect(db).close()
    written = threading.Event()
    started, gate = _gate_claims(monkeypatch, after=written.set)

    async def cancelled_after_write():
        task = asyncio.ensure_future(run_claims.claim(db, "late"))
        await asyncio.to_thread(started.wait)
        gate.set()
        written.wait()  # blocks the loop: the thread's result cannot reach the task before the cancellation
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled_after_write())
    assert _claims(db) == []


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="process start times come from Linux's /proc")
def test_a_claim_whose_pid_now_runs_another_process_is_taken_over(clip, tmp_path):
    """A crashed run's pid, reused by an unrelated process, made its claim look alive: the id was refused as
    "already running" until that other process ended. The claim's recorded process start tells them apart."""
    import asyncio
    import socket
    import sqlite3

    from graph.api import arun_agent
    from graph.run_claims import process_start

    db = tmp_path / "traces.sqlite"
    agent = _agent_on(db)
    host, live = socket.gethostname(), os.getppid()
    conn = sqlite3.connect(str(db))
    conn.execute("CREATE TABLE raa_run_claims (thread_id TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL, "
                 "claimed TEXT NOT NULL)")
    conn.execute("CREATE TABLE raa_run_claim_starts (thread_id TEXT PRIMARY KEY, host TEXT NOT NULL, "
                 "pid INTEGER NOT NULL, started INTEGER NOT NULL)")
    conn.executemany("INSERT INTO raa_run_claims VALUES (?, ?, ?, '2030-01-01T00:00:00+00:00')",
                     [("reused", host, live), ("same", host, live), ("older", host, live)])
    conn.executemany("INSERT INTO raa_run_claim_starts VALUES (?, ?, ?, ?)",
                     [("reused", host, live, process_start(live) + 1), ("same", host, live, process_start(live))])
    conn.commit()
    conn.close()
    assert asyncio.run(arun_agent(agent, str(clip), INSTRUCTION, "reused", "decomposed")).status == "scored"
    for still in ("same", "older"):  # its own process still runs; a claim without a start (earlier versions)
        refused = asyncio.run(arun_agent(agent, str(clip), INSTRUCTION, still, "decomposed"))
        assert refused.reward is None and f"already running in process {live} on" in refused.reasons[0]
    assert sorted(_claims(db)) == [("older", live), ("same", live)]
    conn = sqlite3.connect(str(db))
    assert conn.execute("SELECT thread_id FROM raa_run_claim_starts").fetchall() == [("same",)]  # released too
    conn.close()


def test_a_claim_from_another_host_is_stale_once_older_than_the_age_limit(clip, tmp_path):
    """A claim written on another host was never taken over: a crashed machine's (or a container restarted
    under a new hostname) blocked its run ids, and `raa prune` spared its runs, for good. Past
    `FOREIGN_CLAIM_MAX_AGE_S` such a claim is stale; a younger one still refuses."""
    import asyncio
    import datetime as dt
    import sqlite3

    from graph.api import arun_agent
    from graph.run_claims import FOREIGN_CLAIM_MAX_AGE_S, running

    db = tmp_path / "traces.sqlite"
    agent = _agent_on(db)
    now = dt.datetime.now(dt.UTC)
    old = (now - dt.timedelta(seconds=FOREIGN_CLAIM_MAX_AGE_S + 60)).isoformat(timespec="seconds")
    young = (now - dt.timedelta(seconds=60)).isoformat(timespec="seconds")
    conn = sqlite3.connect(str(db))
    conn.execute("CREATE TABLE raa_run_claims (thread_id TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL, "
                 "claimed TEXT NOT NULL)")
    conn.executemany("INSERT INTO raa_run_claims VALUES (?, 'crashed-node-17', 4242, ?)",
                     [("old", old), ("young", young), ("garbled", "not a time")])
    conn.commit()
    assert running(conn) == {"young"}
    conn.close()
    assert asyncio.run(arun_agent(agent, str(clip), INSTRUCTION, "old", "decomposed")).status == "scored"
    refused = asyncio.run(arun_agent(agent, str(clip), INSTRUCTION, "young", "decomposed"))
    assert refused.reward is None and "already running in process 4242 on crashed-node-17" in refused.reasons[0]
    assert sorted(_claims(db)) == [("garbled", 4242), ("young", 4242)]
