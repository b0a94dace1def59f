"""A second input on a finished thread (the compiled agent used directly, a notebook cell run twice) is refused
before LangGraph writes it: the finished run's record in the trace database stays as it was."""

from __future__ import annotations

import asyncio

import pytest
from graph_scripts import FakeSurprise, full_script, moving_square

INSTRUCTION = "push the red block to the right"


def _agent(path):
    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.testing import ScriptedChatModel
    from graph.tracing import open_saver
    from tools.motion import LKTracker

    model = ScriptedChatModel(full_script())
    backbone = Backbone(model, schema_retries=1, max_retries=1, timeout_s=10, retry_wait=(0.0, 0.0))
    saver = open_saver(path)
    agent = build_reward_agent(AgentConfig(preset="decomposed"), backbone=backbone, checkpointer=saver,
                               tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()))
    return agent, model, saver


def _second(agent, how: str, video: str, config: dict) -> None:
    new = {"video": video, "instruction": "stack the cups"}
    if how == "invoke":
        agent.invoke(new, config)
    elif how == "stream":
        list(agent.stream(new, config, stream_mode="updates"))
    elif how == "ainvoke":
        asyncio.run(agent.ainvoke(new, config))
    else:
        async def drain():
            return [chunk async for chunk in agent.astream(new, config)]

        asyncio.run(drain())


@pytest.mark.parametrize("how", ["invoke", "stream", "ainvoke", "astream"])
def test_second_input_on_a_finished_thread_leaves_its_record(clip, tmp_path, how):
    from graph.thread_guard import ThreadInUseError
    from graph.tracing import list_runs, read_trace

    agent, model, saver = _agent(tmp_path / "traces.sqlite")
    config = {"configurable": {"thread_id": "cell"}}
    first = agent.invoke({"video": str(clip), "instruction": INSTRUCTION}, config)["result"]
    assert first.status == "scored"
    checkpoints, calls = len(list(saver.list(config))), len(model.calls)
    other = moving_square(tmp_path / "other.mp4", seed=3)
    with pytest.raises(ThreadInUseError, match="thread 'cell' already holds a run .*scored.*new thread id"):
        _second(agent, how, str(other), config)
    trace = read_trace(saver, "cell")
    assert trace.values["video"] == str(clip) and trace.values["instruction"] == INSTRUCTION
    assert trace.status == "scored" and trace.reward == first.reward
    assert len(list(saver.list(config))) == checkpoints  # nothing written: no input checkpoint either
    assert len(model.calls) == calls
    assert [r.run_id for r in list_runs(saver, status="ineligible")] == []  # `raa prune --status ineligible`
    # resuming (no new input) is LangGraph's own: nothing left to run, the state is handed back
    assert agent.invoke(None, config)["result"].reward == first.reward
    assert agent.invoke({"video": str(other), "instruction": INSTRUCTION},
                        {"configurable": {"thread_id": "fresh"}})["result"].status == "scored"
