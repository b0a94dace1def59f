"""A resume (input None) or a `Command` on the compiled agent with a SQLite trace database claims its run id
as a run from an input does (`graph.thread_guard.RewardAgent`, `graph.thread_claims`): it claimed nothing, so a
run resumed or forked from Python read "incomplete" while it ran, `raa prune --status incomplete` deleted it under
the running process, and a second process could resume the same thread at once. Not refused for holding a run
(a resume continues one), but refused when another live process holds the id."""

from __future__ import annotations

import asyncio
import os

import pytest
from langgraph.types import Command

from tests.graph_scripts import PUSH
from tests.test_plain_invoke_claims import _agent, _claims, claimed_by_parent


def _paused(clip, db, seen):
    def assess(messages, k):
        from tests.graph_scripts import assessment

        seen.append(_claims(db))
        return assessment()

    agent = _agent(db, assess=assess)
    config = {"configurable": {"thread_id": "r1"}}
    agent.invoke({"video": str(clip), "instruction": PUSH, "run_id": "r1"}, config, interrupt_before=["assess"])
    assert agent.get_state(config).next == ("assess",) and seen == [] and _claims(db) == []
    return agent, config


@pytest.mark.parametrize("call", ["invoke", "ainvoke", "command"])
def test_a_resume_holds_a_claim_while_it_runs_and_releases_it(clip, tmp_path, call) -> None:
    db, seen = tmp_path / "traces.sqlite", []
    agent, config = _paused(clip, db, seen)
    if call == "invoke":
        out = agent.invoke(None, config)
    elif call == "ainvoke":
        out = asyncio.run(agent.ainvoke(None, config))
    else:
        out = agent.invoke(Command(resume="go"), config)
    assert seen == [["r1"]], seen
    assert _claims(db) == []
    assert out["result"].status == "scored"


def test_a_fork_from_an_earlier_checkpoint_holds_a_claim(clip, tmp_path) -> None:
    db, seen = tmp_path / "traces.sqlite", []
    agent, config = _paused(clip, db, seen)
    assert agent.invoke(None, config)["result"].status == "scored"
    before = next(s for s in agent.get_state_history(config) if s.next == ("assess",))
    forked = agent.invoke(None, agent.update_state(before.config, {"notes": ["fork"]}))
    assert forked["result"].status == "scored"
    assert seen == [["r1"], ["r1"]], seen
    assert _claims(db) == []


def test_a_resume_of_an_id_another_process_runs_is_refused(clip, tmp_path) -> None:
    from graph.thread_claims import RunIdClaimed

    db, seen = tmp_path / "traces.sqlite", []
    agent, config = _paused(clip, db, seen)
    claimed_by_parent(db, "r1")
    with pytest.raises(RunIdClaimed, match=f"process {os.getppid()} on"):
        agent.invoke(None, config)
    assert seen == [] and agent.get_state(config).next == ("assess",)
    assert _claims(db) == ["r1"]


def test_a_claim_right_after_this_process_released_it_later_waits_for_that_release(tmp_path, monkeypatch) -> None:
    """A run that ended with an error releases its claim in a daemon thread (`release_later`); a resume or retry of
    the id by the same process at once was refused as "already running" in its own process until that ran."""
    import time

    from graph import run_claims

    file = str(tmp_path / "traces.sqlite")
    assert run_claims.claim_blocking(file, "r2") is None
    real = run_claims.release_quietly

    def slow(file, run_id):
        time.sleep(0.5)
        real(file, run_id)

    monkeypatch.setattr(run_claims, "release_quietly", slow)
    run_claims.release_later(file, "r2")
    assert run_claims.claim_blocking(file, "r2") is None
    assert asyncio.run(run_claims.claim(file, "r3")) is None and run_claims.claim_blocking(file, "r3") is not None
    monkeypatch.setattr(run_claims, "release_quietly", real)
    run_claims.release_quietly(file, "r2")
    run_claims.release_quietly(file, "r3")


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
def test_a_resume_retried_at_once_after_a_refused_one_is_not_refused_for_its_claim(clip, tmp_path, monkeypatch,
                                                                                    how) -> None:
    """A resume refused for another config (`ResumeMismatchError`) releases its claim in a daemon thread
    (`release_later`); the matching agent's resume right after waits for that release instead of finding the id
    "already running" in its own process (here the release is held up half a second)."""
    import time

    from graph import AgentConfig, AgentTools, ResumeMismatchError, build_reward_agent, run_claims
    from graph.builder import default_checkpointer
    from graph.testing import ScriptedChatModel
    from tests.graph_scripts import FakeSurprise, full_script
    from tools.motion import LKTracker

    db, seen = tmp_path / "traces.sqlite", []
    agent, config = _paused(clip, db, seen)
    mismatched = build_reward_agent(AgentConfig(preset="decomposed", draw=5), model=ScriptedChatModel(full_script()),
                                    checkpointer=default_checkpointer(db),
                                    tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()))
    real = run_claims.release_quietly

    def slow(file, run_id):
        time.sleep(0.5)
        real(file, run_id)

    monkeypatch.setattr(run_claims, "release_quietly", slow)
    with pytest.raises(ResumeMismatchError, match="draw 0 \\(agent 5\\)"):
        mismatched.invoke(None, config) if how == "invoke" else asyncio.run(mismatched.ainvoke(None, config))
    out = agent.invoke(None, config) if how == "invoke" else asyncio.run(agent.ainvoke(None, config))
    assert out["result"].status == "scored" and seen == [["r1"]]
    assert _claims(db) == []
