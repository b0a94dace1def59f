"""Resuming an agent run after its process died mid-run (LangGraph's per-step checkpoints, durability "sync"): a
new agent on the same trace database and run id finishes it from the last checkpoint, calls the model only for
the stages left, sends them the prompts an uninterrupted run sends (the inspect conversation and the frames are
rebuilt from the checkpoint's references and the clip) and scores the clip as that run does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from graph_scripts import FakeSurprise, full_script

from graph import AgentConfig, AgentTools, build_reward_agent
from graph.backbone import Backbone
from graph.builder import default_checkpointer
from graph.testing import ScriptedChatModel
from tools.motion import LKTracker

INSTRUCTION = "push the red block to the right"
CHILD = """
import os, sys
sys.path.insert(0, {tests!r})
from test_crash_resume import agent_on
from graph_scripts import full_script
script = full_script(reflect=lambda messages, k: os._exit(3))  # the process dies at its reflect call
agent, _ = agent_on({db!r}, script)
agent.invoke({{"video": {clip!r}, "instruction": {instruction!r}, "run_id": "crashed"}},
             {{"configurable": {{"thread_id": "crashed"}}}}, durability="sync")
"""


def agent_on(db: str, script: dict):
    model = ScriptedChatModel(script)
    backbone = Backbone(model, schema_retries=1, max_retries=1, timeout_s=10, retry_wait=(0.0, 0.0))
    tools = AgentTools(tracker=LKTracker(), surprise=FakeSurprise())
    return build_reward_agent(AgentConfig(preset="full"), backbone=backbone, tools=tools,
                              checkpointer=default_checkpointer(db)), model


def _texts(call) -> list[str]:
    return [m.content if isinstance(m.content, str) else repr(m.content) for m in call.messages]


def test_a_run_resumed_after_its_process_died_scores_as_an_uninterrupted_one(clip, tmp_path):
    whole, whole_model = agent_on(str(tmp_path / "whole.sqlite"), full_script())
    config = {"configurable": {"thread_id": "whole"}}
    expected = whole.invoke({"video": str(clip), "instruction": INSTRUCTION, "run_id": "whole"}, config)["result"]

    db = str(tmp_path / "crashed.sqlite")
    code = CHILD.format(tests=str(Path(__file__).parent), db=db, clip=str(clip), instruction=INSTRUCTION)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), *sys.path])}
    child = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert child.returncode == 3, child.stderr[-2000:]

    agent, model = agent_on(db, full_script())
    config = {"configurable": {"thread_id": "crashed"}}
    assert agent.get_state(config).next == ("reflect",)
    out = agent.invoke(None, config)
    result = out["result"]
    assert (result.status, result.T, result.P, result.V) == (expected.status, expected.T, expected.P, expected.V)
    assert result.reward == pytest.approx(expected.reward) and result.run_id == "crashed"
    assert [c.stage for c in model.calls] == ["reflect", "audit"]
    for stage in ("reflect", "audit"):  # the same prompts (frames and images included) as the whole run's
        assert _texts(model.calls_for(stage)[0]) == _texts(whole_model.calls_for(stage)[0])
    assert [s["node"] for s in out["steps"]] == [s["node"] for s in whole.get_state(
        {"configurable": {"thread_id": "whole"}}).values["steps"]]
