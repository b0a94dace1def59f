"""A trace that cannot be saved at the end of a run does not throw away the reward the gate computed.

The gate's result stands, with a reason (and note) saying that the trace was not saved, naming the error and
the database; a failure before the result exists is still the run's ineligible result."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from graph_scripts import FakeSurprise, full_script, make_agent
from langgraph.checkpoint.memory import InMemorySaver

from graph import AgentConfig, AgentTools, ascore_videos, build_reward_agent, score_video
from graph.api import arun_agent
from graph.backbone import Backbone
from graph.testing import ScriptedChatModel
from graph.tracing import traces_serde
from tools.motion import LKTracker

INSTRUCTION = "push the red block to the right"


class LockedSaver(InMemorySaver):
    """An in-memory checkpointer whose checkpoint writes fail as SQLite's do when the file stays locked."""

    async def aput(self, config, checkpoint, metadata, new_versions):  # type: ignore[override]
        raise sqlite3.OperationalError("database is locked")


class UnreadableSaver(InMemorySaver):
    """A checkpointer that cannot even be read: the run never starts."""

    async def aget_tuple(self, config):  # type: ignore[override]
        raise sqlite3.OperationalError("disk I/O error")


def scripted_backbone() -> Backbone:
    return Backbone(ScriptedChatModel(full_script()), schema_retries=1, max_retries=1, timeout_s=10,
                    retry_wait=(0.0, 0.0))


def agent_with(saver, preset: str = "decomposed"):
    return build_reward_agent(AgentConfig(preset=preset), backbone=scripted_backbone(), checkpointer=saver,
                              tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()))


def reference_reward(clip, preset: str = "decomposed") -> float:
    agent, _ = make_agent(preset)
    result = asyncio.run(arun_agent(agent, str(clip), INSTRUCTION, "run-ref", preset))
    assert result.status == "scored"
    return result.reward


@pytest.mark.parametrize("durability", ["exit", "async"])
def test_a_failed_final_trace_write_keeps_the_computed_reward(clip, durability):
    expected = reference_reward(clip)
    saver = LockedSaver(serde=traces_serde())
    result = asyncio.run(arun_agent(agent_with(saver), str(clip), INSTRUCTION, "run-locked", "decomposed",
                                    durability=durability))
    assert result.status == "scored" and result.reward == pytest.approx(expected)
    note = result.reasons[-1]
    assert note == result.notes[-1]  # notes stay the last entries of reasons
    assert "trace was not saved" in note and "OperationalError: database is locked" in note
    assert "LockedSaver" in note and "raa trace run-locked" in note
    assert saver.get_tuple({"configurable": {"thread_id": "run-locked"}}) is None  # nothing was saved indeed


def test_score_video_and_batches_keep_the_reward_too(clip):
    expected = reference_reward(clip)
    one = score_video(clip, INSTRUCTION, AgentConfig(preset="decomposed"), checkpointer=LockedSaver(),
                      backbone=scripted_backbone(), tools=AgentTools(surprise=FakeSurprise()))
    assert one.status == "scored" and one.reward == pytest.approx(expected)
    agent = agent_with(LockedSaver())
    items = [(str(clip), INSTRUCTION), (str(clip), INSTRUCTION)]
    group = asyncio.run(ascore_videos(items, agent=agent))
    assert [r.reward for r in group] == pytest.approx([expected, expected])
    assert all("trace was not saved" in r.reasons[-1] for r in group)


def test_a_real_sqlite_lock_at_the_final_write_keeps_the_reward(clip, tmp_path, monkeypatch):
    """The trace file stays locked by another connection past the busy timeout when the run's checkpoint is
    written: SQLite's own "database is locked", and the reason names the file."""
    import graph.builder as builder
    import graph.run_claims as run_claims

    expected = reference_reward(clip)
    monkeypatch.setattr(builder, "TRACE_WAIT_S", 0.05)
    monkeypatch.setattr(run_claims, "WAIT_S", 0.05)  # the claim's release meets the lock too
    db = tmp_path / "traces.db"
    saver = builder.default_checkpointer(db)
    other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)  # the write runs in a thread
    put = saver.put

    def locked_put(*args, **kwargs):
        other.execute("BEGIN IMMEDIATE")  # another process's long write holds the lock
        return put(*args, **kwargs)

    saver.put = locked_put
    try:
        result = asyncio.run(arun_agent(agent_with(saver), str(clip), INSTRUCTION, "run-db", "decomposed"))
    finally:
        other.rollback() if other.in_transaction else None
        other.close()
    assert result.status == "scored" and result.reward == pytest.approx(expected)
    assert "database is locked" in result.reasons[-1] and str(db) in result.reasons[-1]


def test_a_store_failure_before_the_result_is_still_ineligible(clip):
    result = asyncio.run(arun_agent(agent_with(UnreadableSaver()), str(clip), INSTRUCTION, "run-x", "decomposed"))
    assert result.status == "ineligible" and result.reward is None
    assert "disk I/O error" in result.reasons[0]


@pytest.mark.parametrize("stream", [False, True])
def test_raa_score_prints_the_kept_reward_and_exits_0(monkeypatch, tmp_path, stream):
    """`raa score` (and `--stream`, which ran its own loop and lost the result the same way, then read it back
    from the trace that was never written): the reward, the reason, exit 0, and no `raa trace` hint that
    would fail."""
    import json

    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from graph.cli import app
    from tests.cli_agent_helpers import _scripted, runner
    from tests.graph_scripts import moving_square

    async def locked(self, *args, **kwargs):
        raise sqlite3.OperationalError("database is locked")

    _scripted(monkeypatch, tmp_path)
    monkeypatch.setattr(AsyncSqliteSaver, "aput", locked)
    clip = moving_square(tmp_path / "m.mp4")
    res = runner.invoke(app, ["score", str(clip), "-i", INSTRUCTION, "--json", "--preset", "no_wmreward",
                              *(["--stream"] if stream else [])])
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout.strip().splitlines()[-1])
    assert result["status"] == "scored" and result["reward"] is not None
    assert "trace was not saved" in result["reasons"][-1] and "traces.sqlite" in result["reasons"][-1]
    assert f"trace: raa trace {result['run_id']}" not in res.output
    assert "trace not saved" in res.output


def test_score_batch_records_the_kept_reward_with_its_reason(monkeypatch, tmp_path):
    import json

    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from graph.cli import app
    from tests.cli_agent_helpers import _scripted, runner
    from tests.graph_scripts import moving_square

    async def locked(self, *args, **kwargs):
        raise sqlite3.OperationalError("database is locked")

    _scripted(monkeypatch, tmp_path)
    monkeypatch.setattr(AsyncSqliteSaver, "aput", locked)
    moving_square(tmp_path / "c0.mp4")
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text(json.dumps({"path": "c0.mp4", "instruction": INSTRUCTION}) + "\n")
    out = tmp_path / "results.jsonl"
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--preset", "no_wmreward"])
    assert res.exit_code == 0, res.output
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["result"]["status"] == "scored" and row["result"]["reward"] is not None
    assert "trace was not saved" in row["result"]["reasons"][-1]
    assert row["result"]["trace_saved"] is False
    assert "traces not saved: 1 of 1 run(s)" in res.output  # the summary counts them


def test_row_writer_counts_rows_whose_trace_was_not_saved(tmp_path):
    """Rows whose result says `trace_saved` false are counted (also under a scored or zero status); rows
    without the field (written before it existed) and ineligible rows of bad lines count as saved."""
    import json

    from graph.batch import RowWriter
    from graph.run_results import ineligible_result
    from graph.schemas import RewardResult

    writer = RowWriter(tmp_path / "out.jsonl")
    kept = RewardResult(status="scored", reward=0.5, reasons=["trace: not saved"], trace_saved=False)
    zero = RewardResult(status="zero", reward=0.0, trace_saved=False)
    fine = RewardResult(status="scored", reward=0.7)
    old = {k: v for k, v in fine.model_dump(mode="json").items() if k != "trace_saved"}
    for n, result in enumerate([kept, zero, fine, ineligible_result("full", "input: bad line")]):
        writer.write(json.dumps({"key": f"k{n}", "result": result.model_dump(mode="json")}), result.status)
    writer.write(json.dumps({"key": "k9", "result": old}), "scored")
    assert writer.unsaved_traces == 2
    assert writer.counts == {"scored": 3, "zero": 1, "ineligible": 1}


def test_an_unsaved_trace_is_a_typed_field_not_only_a_note(clip):
    """Callers read `trace_saved` instead of parsing the note; the note and reason stay as they were (output
    read by older tools), and a result JSON written before the field existed reads as saved."""
    from graph.run_results import UNSAVED_TRACE, trace_saved
    from graph.schemas import RewardResult

    saved = asyncio.run(arun_agent(agent_with(InMemorySaver(serde=traces_serde())), str(clip), INSTRUCTION,
                                   "run-ok", "decomposed"))
    assert saved.trace_saved is True and trace_saved(saved)
    lost = asyncio.run(arun_agent(agent_with(LockedSaver(serde=traces_serde())), str(clip), INSTRUCTION,
                                  "run-lost", "decomposed"))
    assert lost.trace_saved is False and not trace_saved(lost)
    assert lost.reasons[-1].startswith(UNSAVED_TRACE) and lost.notes[-1] == lost.reasons[-1]
    assert RewardResult.model_validate_json(lost.model_dump_json()).trace_saved is False
    old = saved.model_dump(mode="json")
    del old["trace_saved"]
    assert RewardResult.model_validate(old).trace_saved is True


def test_the_run_claim_is_released_without_waiting_on_the_lock_that_failed_the_trace(clip, tmp_path, monkeypatch):
    """The final trace write failed because another process holds the file's write lock: the claim's release
    meets the same lock. It waited for it (up to the claim's busy timeout, 30 s by default) before the result
    came back, and then gave up, leaving the claim. Now the result comes back while the lock is still held,
    and the claim goes once the lock is free."""
    import graph.builder as builder
    import graph.run_claims as run_claims

    monkeypatch.setattr(builder, "TRACE_WAIT_S", 0.05)
    monkeypatch.setattr(run_claims, "WAIT_S", 5.0)  # old code: the result waited this long, then the claim stayed
    db = tmp_path / "traces.db"
    saver = builder.default_checkpointer(db)
    other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    put = saver.put

    def locked_put(*args, **kwargs):
        if not other.in_transaction:
            other.execute("BEGIN IMMEDIATE")  # held until the result is back
        return put(*args, **kwargs)

    saver.put = locked_put
    try:
        result = asyncio.run(arun_agent(agent_with(saver), str(clip), INSTRUCTION, "run-held", "decomposed"))
        assert other.in_transaction  # the lock was held throughout the run's end
    finally:
        other.rollback() if other.in_transaction else None
        other.close()
    assert result.trace_saved is False and result.status == "scored"
    run_claims.join_releases()
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT thread_id FROM raa_run_claims").fetchall() == []
    finally:
        conn.close()


def test_the_kept_result_costs_no_callback_handler(clip):
    """The gate's result is kept through the run's config (`graph.gate_sink`), not a callback handler: with one,
    langchain dispatches a start and an end event to it for every node, model call and chain of the run (~4% of the
    event loop's instructions in `benchmarks/agent_instructions.py`). A caller that passes no callbacks gets none."""
    from langchain_core.callbacks import AsyncCallbackManagerForLLMRun

    seen: list[int] = []

    class Counting(ScriptedChatModel):
        async def _agenerate(self, messages, stop=None, run_manager: AsyncCallbackManagerForLLMRun | None = None,
                             **kwargs):  # noqa: ANN001, ANN201
            seen.append(len(run_manager.handlers) if run_manager is not None else 0)
            return await super()._agenerate(messages, stop, run_manager, **kwargs)

    backbone = Backbone(Counting(full_script()), schema_retries=1, max_retries=1, timeout_s=10, retry_wait=(0.0, 0.0))
    agent = build_reward_agent(AgentConfig(preset="decomposed"), backbone=backbone,
                               checkpointer=InMemorySaver(serde=traces_serde()),
                               tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()))
    result = asyncio.run(arun_agent(agent, str(clip), INSTRUCTION, "run-plain", "decomposed"))
    assert result.status == "scored" and seen and set(seen) == {0}
