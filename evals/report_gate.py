"""The run report's gate section [gate]: the gate's inputs, its decision and the rule it applied.

The rule is read from the gate inputs (`graph.nodes.gate.build_result` records which branch it took): no
reward for an ineligible run, 0 from the quality check, the model's own score for direct scoring, and the
score mapping with or without the failure gate (`gated`). Gate inputs recorded before `gated` was kept
take it from the run's config (preset and switches); when that is unknown too, the page says so. The
failure-gated R_diag rule was printed for every run: a direct score or a run of `audit_no_gate` (no
failure gate) read as gated.

Under the score mapping the section also says where T came from (`t_terms`, from the run's contract and final
assessment through `graph.gate`'s own functions): each essential requirement's status and weight (met 1, partial
0.5, not_met / unverifiable 0, DESIGN §3), the ones that lowered T, and the requirements T leaves out (not
essential). A requirement judged partial lowered R while the page showed T = 0.750 and nothing of why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from evals.report_html import esc, section, table

if TYPE_CHECKING:  # pragma: no cover
    from graph.tracing import RunTrace

GateRule = Literal["ineligible", "quality_zero", "direct", "gated", "ungated", "unknown"]
R_DIAG = "(0.70 T + 0.20 P + 0.10 V)(0.5 + 0.5 P)"
RULE_TEXT: dict[str, str] = {
    "ineligible": "ineligible: no reward (⊥); nothing was scored.",
    "quality_zero": "R = 0 from the quality check (uniform or unusable video); nothing was scored.",
    "direct": "direct scoring: R is the score the model wrote (no score mapping, no failure gate).",
    "gated": f"failure gate on: R = 0 if failure or unverifiable; otherwise {R_DIAG}.",
    "ungated": f"no failure gate in this run: R = {R_DIAG} (failure and unverifiable are not checked).",
    "unknown": f"R = {R_DIAG}, or 0 on failure or an unverifiable essential when the failure gate was on "
               "(the trace does not say whether it was).",
}


def gate_rule(inputs: dict[str, Any], failure_gate: bool | None) -> GateRule:
    """The rule the gate applied, from its inputs; `failure_gate` is the run config's switch (None: unknown),
    used only when the inputs do not record `gated`."""
    if inputs.get("eligible") is False:
        return "ineligible"
    if inputs.get("quality_zero"):
        return "quality_zero"
    if "direct_reward" in inputs:
        return "direct"
    gated = inputs.get("gated", failure_gate)
    return "unknown" if gated is None else "gated" if gated else "ungated"


def t_terms(values: dict[str, Any]) -> str:
    """How T follows from the run's requirement judgments ('' when the state holds no valid contract and
    assessment): "T = 0.750: mean over the essential requirements of met 1, partial 0.5, not_met or
    unverifiable 0: R1 met (1), R2 partial (0.5); lowered by R2 partial; not essential (not in T): R3"."""
    from pydantic import ValidationError

    from graph.gate import STATUS_WEIGHT, essential_ids, requirement_statuses, task_score
    from graph.schemas import Assessment, TaskContract

    try:
        contract = TaskContract.model_validate(values.get("contract"))
        assessment = Assessment.model_validate(values.get("assessment"))
    except ValidationError:
        return ""
    statuses, essential = requirement_statuses(assessment, contract), essential_ids(contract)
    terms = [f"{i} {statuses[i]} ({STATUS_WEIGHT[statuses[i]]:g})" for i in essential]
    lowered = [f"{i} {statuses[i]}" for i in essential if statuses[i] != "met"]
    text = (f"T = {task_score(assessment, contract):.3f}: mean over the essential requirements of met 1, partial "
            f"0.5, not_met or unverifiable 0: {', '.join(terms)}")
    if lowered:
        text += f"; lowered by {', '.join(lowered)}"
    if left := [f"{i} {statuses[i]}" for i in statuses if i not in essential]:
        text += f"; not essential (not in T): {', '.join(left)}"
    return text


def gate_section(trace: RunTrace, failure_gate: bool | None) -> str:
    """The [gate] section of a run report (the last gate step's inputs and decision, then the rule)."""
    from graph.trace_text import gate_value

    gates = [s for s in trace.steps if s.get("node") == "gate"]
    inputs = (gates[-1].get("gate_inputs") if gates else None) or {}
    if not inputs:
        return section("gate", "Gate", "<p class=\"muted\">the run did not reach the gate</p>")
    rows = [[esc(k), esc(gate_value(k, x))] for k, x in inputs.items()]  # a reward as reward_text
    note = esc(gates[-1].get("decision", ""))
    rule = gate_rule(inputs, failure_gate)
    terms = t_terms(trace.values) if rule in ("gated", "ungated", "unknown") else ""
    return section("gate", "Gate and its inputs",
                   table(["input", "value"], rows, raw=True) + f"<p>{note}</p>"
                   + f"<p class=\"muted\" id=\"gate-rule\">{esc(RULE_TEXT[rule])}</p>"
                   + (f"<p class=\"muted\" id=\"gate-terms\">{esc(terms)}</p>" if terms else ""))
