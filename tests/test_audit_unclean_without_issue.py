"""An audit reply `{"clean": false}` naming no issue (no missing requirement, invented condition or contradiction)
was read as a clean audit: `AuditReport.clean` is recomputed from the issues, so the model's "not clean" vanished
and the run went on to the gate as if the audit had passed. Such a reply contradicts itself: it is a malformed
answer, re-asked with the reason like any reply failing its schema, and a run whose re-asks all fail is ineligible
(a fault of stage audit), never scored. Well-formed answers keep their meaning."""

from __future__ import annotations

import pytest
from graph_scripts import CLEAN_AUDIT, full_script, make_agent, run

from graph.schemas import AuditReport

UNCLEAN_NOTHING = {"missing_requirements": [], "invented_conditions": [], "contradictions": [], "clean": False}


def test_the_record_refuses_not_clean_without_an_issue():
    with pytest.raises(ValueError, match="names no issue"):
        AuditReport.model_validate({"clean": False})
    with pytest.raises(ValueError, match="names no issue"):
        AuditReport.model_validate(UNCLEAN_NOTHING)
    assert AuditReport().clean  # written by code without `clean`: recomputed, as before
    assert AuditReport.model_validate({"clean": True}).clean
    assert not AuditReport.model_validate({"clean": True, "contradictions": ["R1 vs frame 3"]}).clean
    assert not AuditReport.model_validate({"clean": False, "missing_requirements": ["R2"]}).clean


def test_an_unclean_audit_naming_nothing_is_reasked(clip):
    agent, model = make_agent("full", full_script(audit=[{"clean": False}, CLEAN_AUDIT]))
    out = run(agent, clip, run_id="unclean-reasked")
    assert len(model.calls_for("audit")) == 2
    assert out["result"].status == "scored" and not out.get("repair_rounds")  # clean: no repair


def test_an_audit_that_keeps_answering_unclean_naming_nothing_makes_the_run_ineligible(clip):
    agent, model = make_agent("full", full_script(audit=[{"clean": False}, UNCLEAN_NOTHING]))
    out = run(agent, clip, run_id="unclean-ineligible")
    res = out["result"]
    assert res.status == "ineligible" and res.reward is None
    assert any(r.startswith("audit: invalid_reply:") and "names no issue" in r for r in res.reasons), res.reasons
