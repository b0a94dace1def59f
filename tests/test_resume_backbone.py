"""A run records the backbone settings that shape its answers (model, structured-output method, temperature, the
images' size and JPEG quality) beside its config, and a resume by an agent with other ones is refused: the stages
left would be answered by another model (or sampled, or shown other images), one reward mixing two judges'
answers with nothing to say so. Transport settings (timeouts, retries) may differ. The switches and the extra tools
are judged one by one, and the refusal names what differs."""

from __future__ import annotations

import pytest
from graph_scripts import FakeSurprise, assessment, full_script

from graph import AgentConfig, AgentTools, build_reward_agent
from graph.backbone import Backbone
from graph.config import run_settings
from graph.frame_store import FrameStore
from graph.testing import ScriptedChatModel
from graph.thread_guard import resume_refusal
from graph.tracing import traces_serde
from tools.motion import LKTracker

INSTRUCTION = "push the red block to the right"
CONFIG = {"configurable": {"thread_id": "resumed"}}
FAILED = {"failure_established": True, "essential_unverifiable": False, "rationale": "the block never moves"}
BACKBONE = {"model": "model-a", "served_model": None, "method": "json_schema", "temperature": 0.0,
            "max_tokens": None, "image_long_side": 512, "jpeg_quality": 85}


def _agent(saver, *, long_side: int = 512, **backbone_opts):
    script = full_script(assess=[assessment(s2="not_met")], reflect=[assessment(s2="not_met")],
                         repair=[assessment(s2="not_met")], final_check=[FAILED])
    opts = {"model_name": "model-a", "schema_retries": 1, "max_retries": 1, "timeout_s": 10, **backbone_opts}
    backbone = Backbone(ScriptedChatModel(script), retry_wait=(0.0, 0.0), **opts)
    return build_reward_agent(AgentConfig(preset="full"), backbone=backbone, checkpointer=saver,
                              frame_store=FrameStore(long_side=long_side),
                              tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()))


def _interrupted(clip):
    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver(serde=traces_serde())
    agent = _agent(saver)
    for chunk in agent.stream({"video": str(clip), "instruction": INSTRUCTION}, CONFIG, stream_mode="updates",
                              durability="sync"):
        if "assess" in chunk:
            break
    assert agent.get_state(CONFIG).next == ("inspect",)
    return saver


@pytest.mark.parametrize(("other", "named"), [
    ({"model_name": "model-b"}, "model 'model-a' (agent 'model-b')"),
    ({"temperature": 0.7}, "temperature 0.0 (agent 0.7)"),
    ({"method": "function_calling"}, "method 'json_schema' (agent 'function_calling')"),
    ({"long_side": 768}, "image_long_side 512 (agent 768)"),
])
def test_a_run_resumed_by_an_agent_of_another_backbone_is_refused(clip, other, named):
    from graph.thread_guard import ResumeMismatchError

    saver = _interrupted(clip)
    assert saver.get_tuple(CONFIG).checkpoint["channel_values"]["backbone"] == BACKBONE
    with pytest.raises(ResumeMismatchError, match=named.replace("(", r"\(").replace(")", r"\)")):
        _agent(saver, **other).invoke(None, CONFIG)
    # transport settings may differ: the same judge answers
    out = _agent(saver, timeout_s=99, max_retries=3, schema_retries=0).invoke(None, CONFIG)
    assert out["result"].status == "zero" and out["result"].preset == "full"


def _values(**changes):
    return {**run_settings(AgentConfig(preset="full").resolved(), backbone=BACKBONE), "steps": [{"node": "assess"}],
            **changes}


def test_a_run_recorded_before_its_backbone_is_not_judged_by_it():
    values = _values()
    del values["backbone"]
    agent = run_settings(AgentConfig(preset="full").resolved(), backbone={**BACKBONE, "model": "model-b"})
    assert resume_refusal("old", values, agent) is None


def test_only_the_backbone_settings_both_know_are_compared():
    values = _values(backbone={"model": "model-a", "a_setting_since_removed": 1})
    agent = run_settings(AgentConfig(preset="full").resolved(), backbone=BACKBONE)
    assert resume_refusal("old", values, agent) is None


def test_a_switch_added_since_the_run_says_nothing_and_a_differing_one_is_named():
    cfg = AgentConfig(preset="full").resolved()
    values = _values(switches={k: v for k, v in cfg.switches().items() if k != "failure_gate"})  # not known then
    assert resume_refusal("old", values, run_settings(cfg, backbone=BACKBONE)) is None
    no_audit = AgentConfig(preset="full", audit=False).resolved()
    refused = resume_refusal("old", _values(), run_settings(no_audit, backbone=BACKBONE))
    assert refused is not None and "switch audit True (agent False)" in str(refused)
    assert "'structured'" not in str(refused)  # not the whole dicts


def test_a_run_resumed_with_other_extra_tools_is_refused_naming_them():
    cfg = AgentConfig(preset="full").resolved()
    values = _values(extra_tools=["a"])
    refused = resume_refusal("old", values, run_settings(cfg, ["b"], backbone=BACKBONE))
    assert refused is not None and "extra evidence tools ['a'] (agent ['b'])" in str(refused)
    refused = resume_refusal("old", values, run_settings(cfg, ["a", "b"], backbone=BACKBONE))
    assert refused is not None and "extra evidence tools ['a'] (agent ['a', 'b'])" in str(refused)
    assert resume_refusal("old", _values(extra_tools=["a", "b"]), run_settings(cfg, ["a", "b"])) is None
    # the order is compared too: it is the order of their reports in reflect's prompt (test_resume_extra_order.py)
    refused = resume_refusal("old", _values(extra_tools=["b", "a"]), run_settings(cfg, ["a", "b"]))
    assert refused is not None and "extra evidence tools ['b', 'a'] (agent ['a', 'b'])" in str(refused)


def test_a_resume_given_a_context_of_another_backbone_is_refused(clip):
    """A context passed at invoke (`context=`, `graph.context.RunContext`) may carry its own backbone: a resume with
    one of another model was let through (the guard read only the build's settings), and its stages left were
    answered by that model under a record naming the first."""
    from graph.context import RunContext, tool_provider
    from graph.thread_guard import ResumeMismatchError

    saver = _interrupted(clip)
    agent = _agent(saver)
    tools = tool_provider(AgentTools(tracker=LKTracker(), surprise=FakeSurprise()))
    script = full_script(assess=[assessment(s2="not_met")], reflect=[assessment(s2="not_met")],
                         repair=[assessment(s2="not_met")], final_check=[FAILED])

    def context(model_name: str) -> RunContext:
        backbone = Backbone(ScriptedChatModel(script), model_name=model_name, schema_retries=1, max_retries=1,
                            timeout_s=10, retry_wait=(0.0, 0.0))
        return RunContext(backbone=backbone, config=AgentConfig(preset="full").resolved(), tools=tools)

    with pytest.raises(ResumeMismatchError, match=r"model 'model-a' \(agent 'model-b'\)"):
        agent.invoke(None, CONFIG, context=context("model-b"))
    out = agent.invoke(None, CONFIG, context=context("model-a"))
    assert out["result"].status == "zero" and out["result"].preset == "full"
