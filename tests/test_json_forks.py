"""Forks whose edited values arrive as JSON: LangGraph Studio and the LangGraph server API
(`client.threads.update_state`) send a state edit as JSON, so an edited assessment (or audit report, contract,
...) reaches the graph as a plain dict, not the pydantic record the nodes and routes read. Such a fork ended
ineligible with "audit: internal: AttributeError: 'dict' object has no attribute 'model_dump'"."""

from __future__ import annotations

import pytest
from graph_scripts import CLEAN_AUDIT, assessment, make_agent, nodes

INSTRUCTION = "push the red block to the right"


def _finished(clip, run_id: str):
    agent, model = make_agent("full")
    config = {"configurable": {"thread_id": run_id}}
    first = agent.invoke({"video": str(clip), "instruction": INSTRUCTION, "run_id": run_id}, config)
    assert first["result"].status == "scored" and first["result"].T == pytest.approx(1.0)
    return agent, model, list(agent.get_state_history(config))


def test_fork_with_a_json_assessment_scores_the_edit(clip):
    agent, _, history = _finished(clip, "json-fork")
    before_audit = next(h for h in history if h.next == ("audit",))
    forked = agent.update_state(before_audit.config, {"assessment": assessment(s2="not_met")})  # a dict, as JSON
    out = agent.invoke(None, forked)
    assert out["faults"] == [] and out["result"].status == "scored"
    assert out["result"].T == pytest.approx(0.5)  # R2 not met: the edit is what was scored
    assert nodes(out)[-3:] == ["audit", "final_check", "gate"]


def test_fork_of_a_node_output_as_json_routes_and_scores(clip):
    """Studio's "edit node output": the node's update replayed `as_node`, every record a dict; the audit route
    reads the audit report too."""
    agent, _, history = _finished(clip, "json-node")
    before_audit = next(h for h in history if h.next == ("audit",))
    forked = agent.update_state(before_audit.config, {"audits": [CLEAN_AUDIT], "repair_rounds": 0}, as_node="audit")
    assert agent.get_state(forked).next == ("final_check",)
    out = agent.invoke(None, forked)
    assert out["faults"] == [] and out["result"].status == "scored"
    assert out["result"].reward == pytest.approx(0.975)


def test_fork_with_an_invalid_json_record_is_ineligible_with_the_reason(clip):
    agent, model, history = _finished(clip, "json-bad")
    before_audit = next(h for h in history if h.next == ("audit",))
    bad = {**assessment(), "physical_level": 42}  # out of the rubric's range
    calls = len(model.calls)
    out = agent.invoke(None, agent.update_state(before_audit.config, {"assessment": bad}))
    assert out["result"].status == "ineligible" and out["result"].reward is None
    assert "assessment" in out["result"].reasons[0] and "physical_level" in out["result"].reasons[0]
    assert len(model.calls) == calls  # refused before any model call


def test_an_invalid_edit_reaching_the_gate_first_is_ineligible(clip):
    agent, _, history = _finished(clip, "json-gate")
    before_gate = next(h for h in history if h.next == ("gate",))
    bad = {**assessment(), "judgments": "all met"}
    out = agent.invoke(None, agent.update_state(before_gate.config, {"assessment": bad}))
    assert out["result"].status == "ineligible" and out["result"].reward is None
    assert out["faults"][-1].stage == "state" and "'assessment'" in out["result"].reasons[0]


def test_record_fields_name_every_record_of_the_state():
    import typing

    from pydantic import BaseModel

    from graph.state import AgentState
    from graph.state_records import RECORD_FIELDS

    def records(tp) -> set[type]:
        args = typing.get_args(tp)
        found = {tp} if isinstance(tp, type) and issubclass(tp, BaseModel) else set()
        return found.union(*(records(a) for a in args)) if args else found

    hints = typing.get_type_hints(AgentState, include_extras=True)
    wanted = {name for name, tp in hints.items() if records(tp)}
    assert wanted == set(RECORD_FIELDS)
    assert all(records(hints[name]) == {model} for name, (model, _) in RECORD_FIELDS.items())
