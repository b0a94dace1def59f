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
