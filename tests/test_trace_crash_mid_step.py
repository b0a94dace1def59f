"""A process killed mid-way through the side-by-side observe / contract step keeps, with durability "async", what
observe wrote once it had finished: LangGraph saves each node's writes (`put_writes`) as the node ends, and
`raa trace` merges them (`graph.pending_writes`). A review saw only the quality step survive; its harness blocked
the one event loop both nodes share (a synchronous sleep inside the scripted contract call), so observe never ran.
The crash here waits without blocking the loop, as a real model call does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from graph.tracing import open_saver, read_trace

CHILD = """
import asyncio, os, sys
sys.path.insert(0, {tests!r})
from graph_scripts import FakeSurprise, full_script
from graph import AgentConfig, AgentTools, build_reward_agent
from graph.backbone import Backbone
from graph.builder import default_checkpointer
from graph.testing import ScriptedChatModel, stage_from_messages
from tools.motion import LKTracker

class DiesInContract(ScriptedChatModel):
    async def _agenerate(self, messages, stop=None, run_manager=None, **kw):
        if stage_from_messages(messages) == "contract":  # once observe has called the model, and a moment more
            for _ in range(400):
                if self.calls_for("observe"):
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)
            os._exit(3)
        return await super()._agenerate(messages, stop, run_manager, **kw)

backbone = Backbone(DiesInContract(full_script()), schema_retries=1, max_retries=1, timeout_s=30,
                    retry_wait=(0.0, 0.0))
agent = build_reward_agent(AgentConfig(preset="full"), backbone=backbone, checkpointer=default_checkpointer({db!r}),
                           tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()))
agent.invoke({{"video": {clip!r}, "instruction": "push the red block to the right", "run_id": "crashed"}},
             {{"configurable": {{"thread_id": "crashed"}}}}, durability="async")
"""


def test_a_crash_mid_step_keeps_the_step_of_the_node_that_finished(clip, tmp_path) -> None:
    db = str(tmp_path / "traces.sqlite")
    code = CHILD.format(tests=str(Path(__file__).parent), db=db, clip=str(clip))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), *sys.path])}
    child = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert child.returncode == 3, child.stderr[-2000:]
    trace = read_trace(open_saver(db, read_only=True), "crashed")
    assert trace.status == "incomplete" and [s["node"] for s in trace.steps] == ["quality", "observe"], trace.steps
    assert trace.values.get("observation"), sorted(trace.values)
