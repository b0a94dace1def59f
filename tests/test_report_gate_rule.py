"""The run report's gate section states the rule the run's gate applied (`raa report`), from tiny traces."""

from __future__ import annotations

import pytest

from evals.report import render_run_report
from graph.tracing import RunTrace

GATED = "R = 0 if failure or unverifiable; otherwise (0.70 T + 0.20 P + 0.10 V)(0.5 + 0.5 P)"
FORMULA = "(0.70 T + 0.20 P + 0.10 V)(0.5 + 0.5 P)"
SCORED = {"eligible": True, "failure": False, "unverifiable": False, "T": 1.0, "P": 0.75, "V": 0.5, "reward": 0.7}


def _gate_section(preset: str, inputs: dict, switches: dict | None = None) -> str:
    values = {"preset": preset, "result": {"reward": inputs.get("reward"), "status": "scored"}}
    if switches is not None:
        values["switches"] = switches
    trace = RunTrace("run-1", "2026-01-01T00:00:00", values,
                     [{"node": "gate", "gate_inputs": inputs, "decision": "scored"}])
    html = render_run_report(trace)
    return html.split('id="gate"', 1)[1].split("</section>", 1)[0]


@pytest.mark.parametrize(("preset", "inputs", "said", "unsaid"), [
    ("direct", {"eligible": True, "direct_reward": 0.7, "reward": 0.7}, "the score the model wrote", FORMULA),
    ("audit_no_gate", {**SCORED, "gated": False}, FORMULA, "R = 0 if failure"),
    ("structured", {**SCORED, "gated": False}, "no failure gate", "R = 0 if failure"),
    ("full", {**SCORED, "gated": True}, GATED, "no failure gate"),
    ("no_audit", {**SCORED, "gated": True}, GATED, "no failure gate"),
    ("full", {"eligible": False}, "ineligible", FORMULA),
    ("full", {"eligible": True, "quality_zero": True, "reward": 0.0}, "quality check", FORMULA),
])
def test_gate_section_states_the_rule_the_run_applied(preset, inputs, said, unsaid):
    """The section printed the failure-gated R_diag rule for every run: a direct score, or a run of
    audit_no_gate (no failure gate) read as gated."""
    section = _gate_section(preset, inputs)
    assert said in section and unsaid not in section


@pytest.mark.parametrize(("preset", "switches", "gated"), [
    ("full", None, True), ("audit_no_gate", None, False), ("motion", None, False),
    ("full", {"failure_gate": False}, False),  # full built with the gate switched off
])
def test_gate_rule_of_a_trace_without_the_gated_input_follows_the_run_config(preset, switches, gated):
    """Gate inputs recorded before `gated` was kept: the rule comes from the run's preset and switches."""
    section = _gate_section(preset, {k: v for k, v in SCORED.items()}, switches)
    assert (GATED in section) is gated and FORMULA in section


CONTRACT = {"requirements": [
    {"id": "R1", "kind": "action", "text": "grasp the block", "essential": True},
    {"id": "R2", "kind": "outcome", "text": "the block is in the bowl", "essential": True},
    {"id": "R3", "kind": "object", "text": "the bowl stays upright", "essential": False}]}
ASSESSMENT = {"judgments": [{"requirement_id": "R1", "status": "met"},
                            {"requirement_id": "R2", "status": "partial"},
                            {"requirement_id": "R3", "status": "not_met"}],
              "physical_level": 5, "visual_level": 5}


def test_gate_section_names_the_requirements_that_lowered_t():
    """A requirement judged partial (or not met, unverifiable) lowers T and so R, and the gate section showed T
    = 0.750 without a word of why: it now lists each essential requirement's status and weight (DESIGN §3: met 1,
    partial 0.5, not_met / unverifiable 0), and says which requirements T leaves out (not essential)."""
    inputs = {**SCORED, "T": 0.75, "P": 1.0, "V": 1.0, "gated": True, "reward": 0.825}
    values = {"preset": "full", "result": {"reward": 0.825, "status": "scored"},
              "contract": CONTRACT, "assessment": ASSESSMENT}
    trace = RunTrace("run-1", "2026-01-01T00:00:00", values,
                     [{"node": "gate", "gate_inputs": inputs, "decision": "scored"}])
    section = render_run_report(trace).split('id="gate"', 1)[1].split("</section>", 1)[0]
    assert "T = 0.750" in section and "R1 met (1)" in section and "R2 partial (0.5)" in section, section
    assert "lowered by R2 partial" in section and "R3" in section and "not essential" in section
    plain = _gate_section("full", {**SCORED, "gated": True})  # no contract in the state: no breakdown
    assert "lowered by" not in plain
