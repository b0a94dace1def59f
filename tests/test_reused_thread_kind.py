"""A new input on a thread that already holds a run is one situation, whichever path sees it: the call's own
setting (its run id), not the clip. `score_video` / `arun_agent` refuse a taken run id with a "settings" fault
(`graph.run_results.run_id_taken`); the quality node, which refuses it for the calls that reach the graph unchecked (a
reused Studio thread), gave an "input" fault: the clip's own (not an outage, so `ineligible_none` in the trainer)
and final for `raa score-batch --retry-ineligible`, though the same clip under a new id is scored."""

from __future__ import annotations

import asyncio

from graph_scripts import FakeSurprise, full_script
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.pregel import Pregel

from graph.api import arun_agent

INSTRUCTION = "push the red block to the right"


def _agent():
    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.testing import ScriptedChatModel
    from tools.motion import LKTracker

    return build_reward_agent(AgentConfig(preset="decomposed"), model=ScriptedChatModel(full_script()),
                              checkpointer=InMemorySaver(),
                              tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()))


def test_a_reused_thread_is_the_same_settings_fault_in_the_graph_and_in_the_api(clip):
    agent = _agent()
    config = {"configurable": {"thread_id": "used"}}
    assert agent.invoke({"video": str(clip), "instruction": INSTRUCTION}, config)["result"].status == "scored"
    # as a server that does not go through the agent's own guard (`graph.thread_guard`) runs it
    chunks = list(Pregel.stream(agent, {"video": str(clip), "instruction": INSTRUCTION}, config,
                                stream_mode="values"))
    in_graph = chunks[-1]["result"]
    by_api = asyncio.run(arun_agent(agent, str(clip), INSTRUCTION, "used", "decomposed"))
    for result in (in_graph, by_api):
        assert result.status == "ineligible" and len(result.faults) == 1, result
        assert result.faults[0].kind == "settings" and result.outage, result
    assert "already holds a run" in in_graph.faults[0].message and "new" in in_graph.faults[0].message
