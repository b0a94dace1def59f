"""What `arun_agent` asks LangGraph to hand back: the two channels it reads, not the whole state after every step."""

from __future__ import annotations

import asyncio

from graph_scripts import FakeSurprise, full_script
from langgraph.checkpoint.memory import InMemorySaver

from graph import AgentConfig, AgentTools, build_reward_agent
from graph.api import arun_agent
from graph.backbone import Backbone
from graph.testing import ScriptedChatModel
from graph.tracing import traces_serde
from tools.motion import LKTracker

INSTRUCTION = "push the red block to the right"


def _agent(script: dict):
    backbone = Backbone(ScriptedChatModel(script), schema_retries=0, max_retries=0, timeout_s=10,
                        retry_wait=(0.0, 0.0))
    return build_reward_agent(AgentConfig(preset="full"), backbone=backbone,
                              checkpointer=InMemorySaver(serde=traces_serde()),
                              tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()))


def _spied(agent, asked: list[dict]):
    plain = agent.ainvoke

    async def ainvoke(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        asked.append(kwargs)
        return await plain(*args, **kwargs)

    agent.ainvoke = ainvoke
    return agent


def test_a_run_reads_back_only_result_and_faults(clip):
    """ainvoke's default hands back every state channel after every superstep (LangGraph reads them all for its
    "values" stream, 31 channels, ~15 supersteps a full run); the run reads `result` and `faults` of the last."""
    asked: list[dict] = []
    agent = _spied(_agent(full_script()), asked)
    result = asyncio.run(arun_agent(agent, str(clip), INSTRUCTION, "run-keys", "full"))
    assert result.status == "scored" and result.reward is not None
    assert [a.get("output_keys") for a in asked] == [["result", "faults"]]
    state = agent.get_state({"configurable": {"thread_id": "run-keys"}}).values
    assert state["result"] == result and len(state["steps"]) > 10  # the trace holds the whole run as before


def test_a_faulted_run_still_reads_its_result(clip):
    """A run whose stage faulted ends with the gate's ineligible result naming the fault, as before."""
    asked: list[dict] = []
    agent = _spied(_agent(full_script(observe=[RuntimeError("boom")])), asked)
    result = asyncio.run(arun_agent(agent, str(clip), INSTRUCTION, "run-fault", "full"))
    assert result.status == "ineligible" and any("boom" in r for r in result.reasons)
    assert [a.get("output_keys") for a in asked] == [["result", "faults"]]


def test_a_run_that_writes_neither_is_the_machinery_fault_it_was(clip, monkeypatch):
    """A graph that ends without writing `result` or `faults` (a bug of the graph: here a gate that returns nothing)
    hands back no values at all once only those two are asked for; it is still the "run ended without a result"
    fault, not an AttributeError out of `arun_agent`."""
    import graph.builder as builder

    async def silent_gate(state, ctx, step):  # noqa: ANN001, ANN202
        return {}

    monkeypatch.setitem(builder._STAGES, "gate", silent_gate)
    result = asyncio.run(arun_agent(_agent(full_script()), str(clip), INSTRUCTION, "run-none", "full"))
    assert result.status == "ineligible" and result.reward is None
    assert any("run ended without a result" in r for r in result.reasons)
