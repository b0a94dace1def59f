"""One config per run: a per-invocation `RunContext` must carry the config the agent was built with.

The wired nodes and routes come from the build config, while the nodes and the gate read the context's: a
context with another config ran the build's stages but gated (and labelled) the run by the other one.
"""

from __future__ import annotations

import pytest
from graph_scripts import FakeSurprise, assessment, full_script, make_agent

INSTRUCTION = "push the red block to the right"
FAILED = {"failure_established": True, "essential_unverifiable": False,
          "rationale": "the block never reaches the right", "evidence_frames": [32]}


def _invoke(agent, clip, ctx, thread: str) -> dict:
    return agent.invoke({"video": str(clip), "instruction": INSTRUCTION}, {"configurable": {"thread_id": thread}},
                        context=ctx)


def _context(model, config):
    """A context with a backbone on `model`, `config` and the tools `make_agent` gives its agents."""
    from graph.backbone import Backbone
    from graph.context import AgentTools, RunContext, tool_provider
    from tools.motion import LKTracker

    backbone = Backbone(model, schema_retries=1, max_retries=1, timeout_s=10, retry_wait=(0.0, 0.0))
    tools = tool_provider(AgentTools(tracker=LKTracker(), surprise=FakeSurprise()))
    return RunContext(backbone=backbone, config=config.resolved(), tools=tools)


def test_a_context_with_another_preset_is_refused_naming_both(clip):
    """Built `full`, invoked with an `audit_no_gate` context: final_check found the failure established, yet
    the run scored 0.625 ungated, labelled `audit_no_gate`. It is now ineligible before any model call."""
    from graph import AgentConfig
    from graph.testing import ScriptedChatModel

    script = full_script(reflect=[assessment(s2="not_met", phys=4)], final_check=[FAILED])
    agent, built_model = make_agent("full", script)
    other = ScriptedChatModel(script)
    res = _invoke(agent, clip, _context(other, AgentConfig(preset="audit_no_gate")), "mixed")["result"]
    assert res.status == "ineligible" and res.reward is None and res.preset == "full"
    assert len(res.reasons) == 1 and res.reasons[0].startswith("context: input: ")
    assert "'audit_no_gate'" in res.reasons[0] and "'full'" in res.reasons[0]
    assert "failure_gate False (agent True)" in res.reasons[0]  # the field that differs
    assert other.calls == [] and built_model.calls == []


def test_a_context_with_another_cap_is_refused_naming_the_field(clip):
    """Same preset, another max_tool_rounds: the inspect prompt stated the context's cap while the route
    enforced the build's."""
    from graph import AgentConfig
    from graph.testing import ScriptedChatModel

    agent, _ = make_agent("full", max_tool_rounds=2)
    other = ScriptedChatModel(full_script())
    res = _invoke(agent, clip, _context(other, AgentConfig(preset="full", max_tool_rounds=5)), "cap")["result"]
    assert res.status == "ineligible" and other.calls == []
    assert "max_tool_rounds 5 (agent 2)" in res.reasons[0] and "(preset 'full')" in res.reasons[0]


def test_a_context_with_the_build_config_is_used(clip):
    """An equal config (built again from the same AgentConfig) is the build's: its backbone answers."""
    from graph import AgentConfig
    from graph.testing import ScriptedChatModel

    agent, built_model = make_agent("full", max_tool_rounds=2)
    other = ScriptedChatModel(full_script())
    res = _invoke(agent, clip, _context(other, AgentConfig(preset="full", max_tool_rounds=2)), "same")["result"]
    assert res.status == "scored" and res.reward == pytest.approx(0.975) and res.preset == "full"
    assert built_model.calls == [] and other.calls
