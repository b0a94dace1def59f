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
    assert len(res.reasons) == 1 and res.reasons[0].startswith("context: settings: ")
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


def _cached_context(model, config, cache):
    """`_context` with a backbone on `cache` (a stage cache shared with other contexts), at draw 0."""
    ctx = _context(model, config)
    ctx.backbone.cache = cache
    return ctx


def test_a_context_backbone_takes_the_configs_draw(clip):
    """Built and invoked at draw 2 (`AgentConfig.draw`) with a context whose backbone was made at draw 0: the
    run read and wrote draw 0's stage-cache entries, so it took another draw's answers (no model call) while
    its config said draw 2. The builder already re-salted its own backbone (`Backbone.for_draw`); the
    invocation's backbone now is too."""
    from graph import AgentConfig
    from graph.cache import StageCache
    from graph.testing import ScriptedChatModel

    cache = StageCache(None)
    first, _ = make_agent("full")
    draw0 = ScriptedChatModel(full_script())
    assert _invoke(first, clip, _cached_context(draw0, AgentConfig(preset="full"), cache), "d0")["result"].status \
        == "scored" and draw0.calls
    agent, built_model = make_agent("full", draw=2)
    other = ScriptedChatModel(full_script())
    ctx = _cached_context(other, AgentConfig(preset="full", draw=2), cache)
    res = _invoke(agent, clip, ctx, "d2")["result"]
    assert res.status == "scored" and built_model.calls == []
    assert other.calls, "the draw-2 run was answered from draw 0's cache entries"
    assert ctx.backbone.draw == 0  # the caller's object is left as it was


def test_a_context_whose_extra_tools_the_agent_does_not_wire_is_refused(clip):
    """Built without extra evidence tools, invoked with a context that has one: the quality step started the
    tool (its frames decoded, its work done) but the graph has no extra node, so reflect never showed its
    report and the run scored as if the caller had passed no tool. Which nodes exist follows the build's
    tools as it follows the build config, so such a context is refused like another config."""
    import numpy as np

    from graph import AgentConfig
    from graph.context import AgentTools, tool_provider
    from graph.testing import ScriptedChatModel
    from tools.extra import EvidenceReport
    from tools.motion import LKTracker

    class Check:
        name = "check"

        def __init__(self) -> None:
            self.calls = 0

        def evaluate(self, frames: np.ndarray, instruction: str) -> EvidenceReport:
            self.calls += 1
            return EvidenceReport(summary="looked", frames=[1])

    agent, built_model = make_agent("full")
    other = ScriptedChatModel(full_script())
    ctx = _context(other, AgentConfig(preset="full"))
    tool = Check()
    ctx.tools = tool_provider(AgentTools(tracker=LKTracker(), surprise=FakeSurprise(), extra=[tool]))
    res = _invoke(agent, clip, ctx, "extra")["result"]
    assert res.status == "ineligible" and res.reward is None
    assert "extra evidence tools" in res.reasons[0] and "'check'" in res.reasons[0], res.reasons
    assert other.calls == [] and built_model.calls == [] and tool.calls == 0


def test_a_refused_context_is_the_callers_setting_an_outage_retried(clip):
    """A refused context is the caller's wiring (its RunContext's config), not the clip: the same clip under the
    agent's own config is scored. It was kind "input", the clip's ⊥ in the trainer's count and final for
    `raa score-batch --retry-ineligible`; as "settings" it is an outage, retried once the caller is fixed."""
    from graph import AgentConfig
    from graph.batch_retry import retryable
    from graph.testing import ScriptedChatModel

    agent, _ = make_agent("full")
    other = ScriptedChatModel(full_script())
    res = _invoke(agent, clip, _context(other, AgentConfig(preset="full", max_tool_rounds=5)), "outage")["result"]
    assert [(f.stage, f.kind) for f in res.faults] == [("context", "settings")]
    assert res.outage and res.faults[0].outage
    assert retryable({"status": "ineligible", "faults": [f.model_dump() for f in res.faults]}, str(clip),
                     clip_changed=lambda _: False)
