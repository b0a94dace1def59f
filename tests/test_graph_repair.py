"""What an image-backed repair may change (graph/nodes/audit.py `guard_flips`), with a scripted backbone."""

from __future__ import annotations

import pytest
from graph_scripts import CLEAN_AUDIT, assessment, full_script, judgments, make_agent, run

CONTRADICTION = {"missing_requirements": [], "invented_conditions": [],
                 "contradictions": ["R3 rationale says smooth but frames show a jump"]}


def test_a_scope_repair_keeps_the_rubric_levels(clip):
    """A repair returning the same judgments with levels 5/5 raised R from 0.48 to 1.0 on no finding."""
    low = assessment(phys=2, vis=2)
    script = full_script(assess=[low], reflect=[low], audit=[CONTRADICTION, CLEAN_AUDIT],
                         repair=[assessment(phys=5, vis=5)])
    agent, _ = make_agent("full", script)
    out = run(agent, clip)
    res = out["result"]
    assert res.status == "scored" and (res.P, res.V) == (0.25, 0.25)
    assert out["assessment"].physical_level == 2 and out["assessment"].visual_level == 2
    assert "repair: physical_level kept 2 (a scope repair does not re-rate the rubric; it returned 5)" in out["notes"]
    assert any(n.startswith("repair: visual_level kept 2") for n in out["notes"])


def test_a_judgment_the_repair_adds_needs_a_shown_frame(clip):
    """A requirement the assessment left out came back met, citing no frame at all, and paid T = 1."""
    no_r2 = {**assessment(), "judgments": [j for j in judgments() if j["requirement_id"] != "R2"]}
    unbacked = assessment()
    unbacked["judgments"][1]["evidence_frames"] = []
    final = {"failure_established": False, "essential_unverifiable": True, "rationale": "R2 not seen"}
    script = full_script(assess=[no_r2], reflect=[no_r2], audit=[CLEAN_AUDIT], repair=[unbacked],
                         final_check=[final])
    agent, _ = make_agent("full", script)
    out = run(agent, clip)
    assert out["assessment"].judgment("R2").status == "unverifiable"
    assert "repair: R2 added as unverifiable (met cited no frame shown)" in out["notes"]
    assert out["result"].reward == 0.0 and out["result"].unverifiable is True


def test_a_judgment_the_repair_adds_from_a_shown_frame_counts(clip):
    no_r2 = {**assessment(), "judgments": [j for j in judgments() if j["requirement_id"] != "R2"]}
    agent, model = make_agent("full", full_script(assess=[no_r2], reflect=[no_r2], audit=[CLEAN_AUDIT]))
    out = run(agent, clip)
    shown = model.calls_for("repair")[0]
    assert shown.images() > 0
    assert out["assessment"].judgment("R2").status == "met"  # assessment() cites frames 0, 16, 32: shown
    assert out["result"].reward == pytest.approx(0.975)
