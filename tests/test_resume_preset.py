"""Resuming a run (input None on its thread) with an agent built with another config: the stages left would run
under the other preset's switches and gate, and the result would carry its label beside a trace of the first
preset's stages (a `full` run resumed by an `audit_no_gate` agent skipped the final check's failure gate and
scored a failed clip). Refused before anything is written: the run can still be resumed by a matching agent."""

from __future__ import annotations

import asyncio

import pytest
from graph_scripts import FakeSurprise, assessment, full_script

from graph import AgentConfig, AgentTools, build_reward_agent
from graph.backbone import Backbone
from graph.testing import ScriptedChatModel
from graph.tracing import traces_serde
from tools.motion import LKTracker

INSTRUCTION = "push the red block to the right"
FAILED = {"failure_established": True, "essential_unverifiable": False, "rationale": "the block never moves"}
CONFIG = {"configurable": {"thread_id": "resumed"}}


def _agent(saver, config: AgentConfig):
    script = full_script(assess=[assessment(s2="not_met")], reflect=[assessment(s2="not_met")],
                         repair=[assessment(s2="not_met")], final_check=[FAILED])
    backbone = Backbone(ScriptedChatModel(script), schema_retries=1, max_retries=1, timeout_s=10,
                        retry_wait=(0.0, 0.0))
    return build_reward_agent(config, backbone=backbone, checkpointer=saver,
                              tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()))


def _interrupted(clip):
    """A `full` run stopped after its assess step (its per-step checkpoints kept), and its checkpointer."""
    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver(serde=traces_serde())
    agent = _agent(saver, AgentConfig(preset="full"))
    for chunk in agent.stream({"video": str(clip), "instruction": INSTRUCTION, "run_id": "resumed"}, CONFIG,
                              stream_mode="updates", durability="sync"):
        if "assess" in chunk:
            break
    assert agent.get_state(CONFIG).next == ("inspect",)
    return saver


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
@pytest.mark.parametrize("other", [AgentConfig(preset="audit_no_gate"), AgentConfig(preset="full", audit=False),
                                   AgentConfig(preset="full", max_tool_rounds=1)])
def test_a_run_resumed_by_an_agent_of_another_config_is_refused(clip, how, other):
    from graph.thread_guard import ResumeMismatchError

    saver = _interrupted(clip)
    before = len(list(saver.list(CONFIG)))
    agent = _agent(saver, other)
    with pytest.raises(ResumeMismatchError, match="'resumed' was started by an agent of preset 'full'"):
        if how == "invoke":
            agent.invoke(None, CONFIG)
        else:
            asyncio.run(agent.ainvoke(None, CONFIG))
    assert len(list(saver.list(CONFIG))) == before  # nothing written
    out = _agent(saver, AgentConfig(preset="full")).invoke(None, CONFIG)  # still resumable by its own config
    assert out["result"].status == "zero" and out["result"].reward == 0.0 and out["result"].preset == "full"


def test_a_finished_run_resumed_by_another_config_is_refused_too(clip):
    from langgraph.checkpoint.memory import InMemorySaver

    from graph.thread_guard import ResumeMismatchError

    saver = InMemorySaver(serde=traces_serde())
    _agent(saver, AgentConfig(preset="full")).invoke({"video": str(clip), "instruction": INSTRUCTION}, CONFIG)
    expected = r"preset 'full' with another config than this agent's \(preset 'no_audit'\): preset 'full' \(agent"
    with pytest.raises(ResumeMismatchError, match=expected):
        _agent(saver, AgentConfig(preset="no_audit")).invoke(None, CONFIG)


class _Report:
    """An extra evidence tool (`tools.extra`) reporting one frame."""

    name = "gripper_check"

    def evaluate(self, frames, instruction):
        from tools.extra import EvidenceReport

        return EvidenceReport(summary="the gripper closes at frame 9", frames=[9])


@pytest.mark.parametrize(("started", "resumed"), [([_Report()], []), ([], [_Report()])])
def test_a_run_resumed_with_or_without_the_extra_tools_it_was_started_with_is_refused(clip, started, resumed):
    """Extra evidence tools wire the extra node: a run started with one and resumed without it scored without its
    report (started by quality, shown by no node), as a context without them is refused (`tools_mismatch`)."""
    from langgraph.checkpoint.memory import InMemorySaver

    from graph.thread_guard import ResumeMismatchError

    def agent(extra):
        backbone = Backbone(ScriptedChatModel(full_script()), schema_retries=1, max_retries=1, timeout_s=10,
                            retry_wait=(0.0, 0.0))
        return build_reward_agent(AgentConfig(preset="full"), backbone=backbone, checkpointer=saver,
                                  tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise(), extra=extra))

    saver = InMemorySaver(serde=traces_serde())
    first = agent(started)
    for chunk in first.stream({"video": str(clip), "instruction": INSTRUCTION}, CONFIG, stream_mode="updates",
                              durability="sync"):
        if "assess" in chunk:
            break
    with pytest.raises(ResumeMismatchError, match="extra evidence tools"):
        agent(resumed).invoke(None, CONFIG)
    out = agent([_Report()] if started else []).invoke(None, CONFIG)  # the same wiring: resumed
    assert out["result"].status == "scored" and bool(out.get("extra_evidence")) == bool(started)


def test_a_run_resumed_with_only_another_motion_prefetch_is_not_refused(clip):
    """`motion_prefetch` decides when the grid track is computed, never what a run gathers or scores
    (`graph.nodes.tracking`): a run started with the speculative track off resumes under the default."""
    saver = _interrupted(clip)
    out = _agent(saver, AgentConfig(preset="full", motion_prefetch="off")).invoke(None, CONFIG)
    assert out["result"].status == "zero" and out["result"].preset == "full"


@pytest.mark.parametrize("recorded", [
    {"preset": "full"},  # before the switches were recorded
    {"preset": "full", "switches": {"structured": True, "decompose": True, "task_blind": True,
                                    "visual_verify": True, "motion": True, "wmreward": True, "audit": True,
                                    "failure_gate": True}},  # before the overrides were
])
def test_a_run_recorded_by_an_older_version_is_not_refused_for_what_it_did_not_record(recorded):
    """A checkpoint written before a setting was recorded says nothing about it: only what it recorded is held to
    the agent's (the preset, here the same), as a checkpoint that recorded no config is not checked at all."""
    from graph.config import run_settings
    from graph.thread_guard import resume_refusal

    values = {**recorded, "steps": [{"node": "assess"}], "sample": [0, 1]}
    assert resume_refusal("old", values, run_settings(AgentConfig(preset="full").resolved())) is None
    capped = AgentConfig(preset="full", max_tool_rounds=2)  # whether the run had this cap was not recorded
    assert resume_refusal("old", values, run_settings(capped.resolved())) is None
    drawn = AgentConfig(preset="full", draw=2)  # nor the draw it took
    assert resume_refusal("old", values, run_settings(drawn.resolved())) is None
    refused = resume_refusal("old", values, run_settings(AgentConfig(preset="no_audit").resolved()))
    assert refused is not None and "preset 'full' (agent 'no_audit')" in str(refused)


def test_a_run_resumed_at_another_draw_is_refused(clip):
    """The draw salts the stage-cache keys (`Backbone.for_draw`): a draw-0 run resumed at draw 1 took its stages
    left from draw 1's answers, a run of neither draw (its draw-0 rerun no longer served from the cache)."""
    from graph.thread_guard import ResumeMismatchError

    saver = _interrupted(clip)
    before = len(list(saver.list(CONFIG)))
    with pytest.raises(ResumeMismatchError, match=r"draw 0 \(agent 1\)"):
        _agent(saver, AgentConfig(preset="full", draw=1)).invoke(None, CONFIG)
    assert len(list(saver.list(CONFIG))) == before  # nothing written
    out = _agent(saver, AgentConfig(preset="full")).invoke(None, CONFIG)
    assert out["result"].status == "zero" and out["draw"] == 0


@pytest.mark.parametrize("server", [{"inspect_mode": "plan"}, {"coordinates": "pixels"}])
def test_a_run_that_recorded_its_overrides_but_not_its_server_ran_under_the_default_server_settings(server):
    """A run of 12-04..12-06 listed its server settings among its overrides when they differed from the defaults,
    and recorded no `server`: one that lists none ran under the defaults, and a resume by an agent fitted to another
    server is refused (its inspect stages would ask for a plan, or points in pixels, of a run started with tools)."""
    from graph.config import run_settings
    from graph.thread_guard import resume_refusal

    full = AgentConfig(preset="full")
    values = {"preset": "full", "switches": full.switches(), "overrides": {}, "steps": [{"node": "assess"}]}
    refused = resume_refusal("old", values, run_settings(AgentConfig(preset="full", **server).resolved()))
    assert refused is not None and "server {'inspect_mode': 'tools', 'coordinates': 'unit'}" in str(refused)
    assert resume_refusal("old", values, run_settings(full.resolved())) is None
    listed = {**values, "overrides": dict(server)}  # one that listed it resumes under it, and only under it
    assert resume_refusal("old", listed, run_settings(AgentConfig(preset="full", **server).resolved())) is None
    assert resume_refusal("old", listed, run_settings(full.resolved())) is not None
