"""A call that passes its own context (`context=`, a `graph.context.RunContext`) is checked against that context's run
settings only when it resumes a run that recorded its config: on a fresh run the guard computed them (backbone and
config settings, ~33 us) and used nothing of them (the quality step records its own)."""

from __future__ import annotations

from graph_scripts import FakeSurprise, assessment, full_script

from graph import AgentConfig, AgentTools, build_reward_agent
from graph.backbone import Backbone
from graph.context import RunContext, tool_provider
from graph.testing import ScriptedChatModel
from graph.tracing import traces_serde
from tools.motion import LKTracker

INSTRUCTION = "push the red block to the right"
FAILED = {"failure_established": True, "essential_unverifiable": False, "rationale": "the block never moves"}


CALLS: list[str] = []
"""The calls of `_Counted.run_settings`."""


class _Counted(RunContext):
    """A RunContext that counts the calls of its `run_settings` in CALLS."""

    def run_settings(self):
        CALLS.append("run_settings")
        return super().run_settings()


def test_the_guard_computes_a_passed_contexts_settings_only_for_a_resume(clip):
    from langgraph.checkpoint.memory import InMemorySaver

    script = full_script(assess=[assessment(s2="not_met")], reflect=[assessment(s2="not_met")],
                         repair=[assessment(s2="not_met")], final_check=[FAILED])
    backbone = Backbone(ScriptedChatModel(script), model_name="model-a", schema_retries=1, max_retries=1,
                        timeout_s=10, retry_wait=(0.0, 0.0))
    tools = AgentTools(tracker=LKTracker(), surprise=FakeSurprise())
    agent = build_reward_agent(AgentConfig(preset="full"), backbone=backbone, tools=tools,
                               checkpointer=InMemorySaver(serde=traces_serde()))
    context = _Counted(backbone=backbone, config=AgentConfig(preset="full").resolved(), tools=tool_provider(tools))
    CALLS.clear()
    config = {"configurable": {"thread_id": "lazy"}}
    for chunk in agent.stream({"video": str(clip), "instruction": INSTRUCTION}, config, context=context,
                              stream_mode="updates", durability="sync"):
        if "assess" in chunk:
            break
    assert CALLS == ["run_settings"]  # the quality step's, which records them; none by the guard
    out = agent.invoke(None, config, context=context)  # a resume: checked against the context's settings
    assert CALLS == ["run_settings"] * 2
    assert out["result"].status == "zero" and out["result"].preset == "full"
