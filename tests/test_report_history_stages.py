"""The run report's judgment "history" names the stage behind each status: it read "met → partial → partial",
so which stage (assess, reflect, a repair round) set a requirement's status could not be told."""

from __future__ import annotations

import re

from graph_scripts import CLEAN_AUDIT, assessment, full_script, make_agent

from graph.trace_text import assessment_stages

BAD = {"missing_requirements": ["R3"], "invented_conditions": [], "contradictions": []}


def _step(node: str, decision: str = "ok", audit_round: int | None = None) -> dict:
    return {"node": node, "decision": decision, "audit_round": audit_round}


def test_assessment_stages_from_steps():
    steps = [_step("quality"), _step("assess"), _step("inspect"), _step("reflect"), _step("audit", audit_round=0),
             _step("repair", audit_round=0), _step("audit", audit_round=1), _step("repair", "fault (timeout): x", 1)]
    assert assessment_stages(steps, 3) == ["assess", "reflect", "repair 1"]
    assert assessment_stages(steps, 2) is None  # steps and assessments disagree: no label rather than a wrong one


def test_a_repair_stage_names_its_round_as_the_repairs_table_does():
    """The history's "repair N" and the repairs table's round column (`audit_round_text`) read one stored
    `audit_round`: a bool one (an edited fork) was "repair 2" in the history and "True" in the table."""
    steps = [_step("repair", audit_round=True), _step("repair", audit_round=None), _step("repair", audit_round=2)]
    assert assessment_stages(steps, 3) == ["repair True", "repair", "repair 3"]


def test_report_history_names_the_stages(clip):
    from evals.report import render_run_report
    from graph.tracing import read_trace

    script = full_script(audit=[BAD, CLEAN_AUDIT], repair=[assessment(s2="partial", frames=(10, 20))])
    agent, _ = make_agent("full", script)
    agent.invoke({"video": str(clip), "instruction": "push the red block to the right"},
                 {"configurable": {"thread_id": "h"}})
    html = render_run_report(read_trace(agent.checkpointer, "h"))
    row = re.search(r'id="req-R2".*?</tr>', html, re.S).group(0)
    assert "assess: met → reflect: met → repair 1: partial" in row


def test_report_audit_rounds_count_from_1_as_the_repair_decision(clip):
    """The run report's "Scope audit" tables numbered the audits 0, 1 and the first repair round 0 beside its
    decision "round 1: ...", as `raa trace`'s audit column did; both count from 1 now, as the history's "repair 1"."""
    from evals.report import render_run_report
    from graph.tracing import read_trace

    agent, _ = make_agent("full", full_script(audit=[BAD, CLEAN_AUDIT], repair=[assessment()]))
    agent.invoke({"video": str(clip), "instruction": "push the red block to the right"},
                 {"configurable": {"thread_id": "a"}})
    section = re.search(r'<section id="audits">(.*?)</section>', render_run_report(read_trace(agent.checkpointer, "a")),
                        re.S).group(1)
    audits, repairs = (re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td>", t)
                       for t in re.findall(r"<tbody>(.*?)</tbody>", section))
    assert [n for n, _ in audits] == ["1", "2"], audits
    assert len(repairs) == 1 and repairs[0][0] == "1" and repairs[0][1].startswith("round 1: "), repairs
