"""The thread guard on the paths the reuse test does not take: a thread id bound with `with_config`, `batch`,
`astream_events`; and the agent's own API (`get_graph`, `copy`) still works on the subclass."""

from __future__ import annotations

import asyncio

import pytest
from graph_scripts import moving_square
from test_thread_reuse import INSTRUCTION, _agent


@pytest.fixture
def finished(clip, tmp_path):
    agent, model, saver = _agent(tmp_path / "traces.sqlite")
    config = {"configurable": {"thread_id": "cell"}}
    assert agent.invoke({"video": str(clip), "instruction": INSTRUCTION}, config)["result"].status == "scored"
    return agent, saver, config, moving_square(tmp_path / "other.mp4", seed=3)


def test_a_thread_id_bound_with_with_config_is_guarded_too(finished):
    from graph.thread_guard import RewardAgent, ThreadInUseError

    agent, saver, config, other = finished
    bound = agent.with_config(configurable={"thread_id": "cell"})
    assert isinstance(bound, RewardAgent)
    checkpoints = len(list(saver.list(config)))
    with pytest.raises(ThreadInUseError, match="thread 'cell' already holds a run"):
        bound.invoke({"video": str(other), "instruction": "stack the cups"})
    assert len(list(saver.list(config))) == checkpoints


def test_batch_and_astream_events_are_guarded(finished):
    from graph.thread_guard import ThreadInUseError

    agent, saver, config, other = finished
    new = {"video": str(other), "instruction": "stack the cups"}
    with pytest.raises(ThreadInUseError):
        agent.batch([new], config)

    async def events():
        return [e async for e in agent.astream_events(new, config, version="v2")]

    with pytest.raises(ThreadInUseError):
        asyncio.run(events())
    assert read_values(saver)["video"] != str(other)


def read_values(saver):
    from graph.tracing import read_trace

    return read_trace(saver, "cell").values


def test_get_graph_draws_the_agent(finished):
    agent = finished[0]
    nodes = set(agent.get_graph().nodes)
    assert {"quality", "assess"} <= nodes


def test_the_agent_runs_as_a_subgraph_of_a_checkpointed_parent(clip, tmp_path):
    """As a parent graph's node the agent's checkpoints are the parent's (a non-empty checkpoint_ns): the guard
    leaves it alone, so a parent's first run on a thread scores."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, StateGraph

    from graph.state import AgentState

    agent, _, _ = _agent(tmp_path / "traces.sqlite")
    parent = StateGraph(AgentState)
    parent.add_node("reward", agent)
    parent.add_edge(START, "reward")
    compiled = parent.compile(checkpointer=InMemorySaver())
    out = compiled.invoke({"video": str(clip), "instruction": INSTRUCTION}, {"configurable": {"thread_id": "p"}})
    assert out["result"].status == "scored"


def test_a_run_stopped_by_interrupt_before_resumes_and_forks_run(clip, tmp_path):
    """Resuming after an interrupt (input None) and a fork from the input checkpoint with a new
    input are LangGraph's own continuations: the guard lets them run."""
    agent, _, _ = _agent(tmp_path / "traces.sqlite")
    config = {"configurable": {"thread_id": "paused"}}
    agent.invoke({"video": str(clip), "instruction": INSTRUCTION}, config, interrupt_before=["assess"])
    assert agent.get_state(config).next == ("assess",)
    assert agent.invoke(None, config)["result"].status == "scored"
    first = next(s for s in agent.get_state_history(config) if not s.values.get("steps"))
    forked = agent.invoke({"video": str(clip), "instruction": INSTRUCTION}, first.config)
    assert forked["result"].status == "scored"
