"""Every ineligible result the agent's machinery caused carries a Fault that says so.

The gate's "the run ended without an assessment" and "the failure gate is on but no final check was recorded"
(a node that ended without writing its output: a bug of the agent, never the clip's), a run that ended without
a result, and a call refused because its run id is taken had reasons but no fault, so `RewardResult.outage`
was False and the reward service and the trainer counted them as the agent's verdict that the clip could not
be judged (``ineligible_none``), not as an outage (``ineligible_error``).
"""

from __future__ import annotations

import asyncio

from graph.api import _run_agent
from graph.backbone import Backbone
from graph.config import AgentConfig
from graph.context import RunContext
from graph.nodes.gate import build_result
from graph.run_results import refused_running
from graph.schemas import Assessment, Requirement, RequirementJudgment, TaskContract
from graph.testing import ScriptedChatModel

CONTRACT = TaskContract(requirements=[Requirement(id="R1", kind="outcome", text="done")])
ASSESSMENT = Assessment(judgments=[RequirementJudgment(requirement_id="R1", status="met", rationale="yes")],
                        physical_level=5, visual_level=5)


def _ctx(preset: str) -> RunContext:
    return RunContext(backbone=Backbone(ScriptedChatModel({})), config=AgentConfig(preset=preset).resolved())


def test_a_run_that_ended_without_an_assessment_is_an_internal_fault():
    result, inputs = build_result({"contract": CONTRACT, "notes": ["a note"]}, _ctx("decomposed"), "r1")
    assert result.reward is None and inputs == {"eligible": False}
    assert [(f.stage, f.kind) for f in result.faults] == [("gate", "internal")] and result.outage, result
    assert result.reasons == ["gate: internal: the run ended without an assessment", "a note"]


def test_a_failure_gate_without_its_final_check_is_an_internal_fault():
    state = {"contract": CONTRACT, "assessment": ASSESSMENT}
    result, _ = build_result(state, _ctx("full"), "r1")
    assert result.reward is None and [(f.stage, f.kind) for f in result.faults] == [("gate", "internal")]
    assert result.outage and "no final check was recorded" in result.reasons[0], result


def test_a_run_id_taken_by_a_running_run_is_the_calls_setting_not_the_clip():
    for process in (None, "process 7 on host-a (since 2026-01-01T00:00:00Z)"):
        result = refused_running("full", "dup", process)
        assert [(f.stage, f.kind) for f in result.faults] == [("agent", "settings")] and result.outage, result
        assert "use a new run id" in result.faults[0].message and result.run_id == ""


class _Traced:
    """An agent whose checkpointer already holds a trace for every run id, or whose run ends with no result."""

    def __init__(self, traced: bool) -> None:
        self.checkpointer = object() if traced else None
        self.config = None  # a compiled graph's bound config (graph.api reads the claim age from it)

    async def aget_state(self, config):
        return type("State", (), {"values": {"result": "earlier"}})()

    async def ainvoke(self, inputs, config, durability=None, output_keys=None):  # (a compiled graph's keywords)
        return {}


def test_a_run_id_that_already_has_a_trace_is_the_calls_setting_not_the_clip():
    result = asyncio.run(_run_agent(_Traced(True), "c.mp4", "push", "old", "full", {}, "exit", None))
    assert "already has a trace" in result.reasons[0]
    assert [(f.stage, f.kind) for f in result.faults] == [("agent", "settings")] and result.outage, result


def test_a_run_that_ended_without_a_result_or_a_fault_is_an_internal_fault():
    result = asyncio.run(_run_agent(_Traced(False), "c.mp4", "push", "r", "full", {}, "exit", None))
    assert result.reward is None and "run ended without a result" in result.reasons[0]
    assert [(f.stage, f.kind) for f in result.faults] == [("agent", "internal")] and result.outage, result


def test_a_refused_or_failed_calls_reason_is_its_faults_reason():
    """Each result the agent's machinery made reads its fault as every other fault reads ("stage: kind: message"),
    so the reason a batch row shows and the fault it is grouped and retried by say the same; the refusals' reasons
    were the bare message and machinery_failed's "agent: message" (no kind)."""
    from graph.run_results import machinery_failed

    results = [refused_running("full", "dup", None), machinery_failed("full", "run ended without a result", "r"),
               asyncio.run(_run_agent(_Traced(True), "c.mp4", "push", "old", "full", {}, "exit", None))]
    for result in results:
        assert result.reasons == [result.faults[0].reason()], result
    assert results[2].reasons[0].startswith("agent: settings: run id 'old' already has a trace")


def test_a_run_id_that_already_has_a_trace_gives_no_run_id_naming_that_trace():
    """The trace under the id is an earlier run's (maybe of another clip): `raa trace` on the refused result's id
    showed it as this call's, as for a run id already running (`refused_running`)."""
    result = asyncio.run(_run_agent(_Traced(True), "c.mp4", "push", "old", "full", {}, "exit", None))
    assert result.run_id == "" and "'old'" in result.reasons[0]
