"""Assessment hygiene before the score mapping (graph.nodes.common.tidy_assessment): judgment ids, duplicates and
frame references the model got wrong are handled explicitly, never silently."""

from __future__ import annotations

import pytest
from graph_scripts import assessment, full_script, make_agent, run


def test_judgment_id_in_other_case_counts_for_its_requirement(clip):
    """A judgment written "r2 " for contract requirement R2 was dropped without a word: T fell from 1.0 to 0.5."""
    a = assessment()
    a["judgments"][1]["requirement_id"] = "r2 "
    agent, _ = make_agent("decomposed", full_script(assess=[a]))
    out = run(agent, clip)
    res = out["result"]
    assert res.status == "scored" and res.T == pytest.approx(1.0)
    assert out["assessment"].judgment("R2").status == "met"
    assert any("'r2 ' read as R2" in r for r in res.reasons)


def test_unknown_id_duplicate_and_frames_outside_the_clip_are_noted(clip):
    """Unknown ids, a second judgment of one requirement and evidence frames past the clip's end (33 frames) were
    dropped silently; each now leaves a note in the result's reasons (the score mapping itself is unchanged)."""
    a = assessment()
    a["judgments"][0]["evidence_frames"] = [5, 40, 99]
    a["judgments"].append({"requirement_id": "R9", "status": "met", "evidence_frames": [1], "rationale": "x"})
    a["judgments"].append({"requirement_id": "R1", "status": "met", "evidence_frames": [1], "rationale": "again"})
    agent, _ = make_agent("decomposed", full_script(assess=[a]))
    out = run(agent, clip)
    res = out["result"]
    assert res.T == pytest.approx(1.0)  # R1 keeps its first judgment (a restated met, frames [1], is dropped)
    assert out["assessment"].judgment("R1").evidence_frames == [5]
    reasons = " | ".join(res.reasons)
    assert "assess: R1 cited frames [40, 99] outside the clip (0..32); dropped" in reasons
    assert "unknown requirement 'R9' (met) dropped" in reasons
    assert "second judgment for R1 (met) dropped; the first (met) is kept" in reasons
    step = next(s for s in out["steps"] if s["node"] == "assess")
    assert "3 judgment fix(es) noted" in step["decision"]


def test_repair_reads_a_case_variant_id_for_a_missing_requirement(clip):
    """The repair adds the judgment the audit found missing, but spells its id "r3": it was dropped, so every round
    found R3 missing again until the 3 rounds were spent."""
    partial = assessment()
    partial["judgments"] = partial["judgments"][:2]
    fixed = assessment()
    fixed["judgments"][2]["requirement_id"] = "r3"
    missing = {"missing_requirements": ["R3"], "invented_conditions": [], "contradictions": []}
    clean = {"missing_requirements": [], "invented_conditions": [], "contradictions": []}
    agent, model = make_agent("full", full_script(assess=[partial], reflect=[partial], audit=[missing, clean],
                                                  repair=[fixed]))
    out = run(agent, clip)
    assert out["repair_rounds"] == 1 and len(model.calls_for("repair")) == 1
    assert out["assessment"].judgment("R3").status == "partial"


def test_audit_ids_are_read_against_the_contract(clip):
    """The audit named "r1" (R1) and "R9" (no such requirement): R9 kept every round unclean, so all 3 repair
    rounds were spent on a requirement no repair can add; now R9 is dropped with a note and r1 is R1."""
    finding = {"missing_requirements": ["r1", "R9"], "invented_conditions": [], "contradictions": []}
    clean = {"missing_requirements": [], "invented_conditions": [], "contradictions": []}
    agent, model = make_agent("full", full_script(audit=[finding, clean], repair=[assessment()]))
    out = run(agent, clip)
    assert out["repair_rounds"] == 1 and len(model.calls_for("repair")) == 1
    assert out["audits"][0].missing_requirements == ["R1"]
    assert any("audit: missing requirement 'R9' is not in the contract" in r for r in out["result"].reasons)


def test_final_check_evidence_frames_outside_the_clip_are_dropped_with_a_note(clip):
    """The final check's evidence frames were never checked against the clip (33 frames): frames 500 and -3 were
    kept in the state and shown in the report as frames of the clip. They are dropped with a note; the flags (and
    so the reward) stand."""
    script = full_script(reflect=[assessment(s2="not_met", phys=4)],
                         final_check=[{"failure_established": True, "essential_unverifiable": False,
                                       "rationale": "the block stops short", "evidence_frames": [32, 500, -3]}])
    out = run(make_agent("full", script)[0], clip)
    assert out["final_check"].evidence_frames == [32] and out["final_check"].failure_established
    note = "final_check: cited frames [-3, 500] outside the clip (0..32); dropped"
    assert note in out["notes"] and note in out["result"].reasons
    assert out["result"].status == "zero" and out["result"].reward == 0.0
    step = next(s for s in out["steps"] if s["node"] == "final_check")
    assert "2 out-of-clip evidence frame(s) dropped" in step["decision"]


@pytest.mark.parametrize("mode", ["tools", "plan"])
def test_inspection_is_pointed_at_a_requirement_the_assessment_left_out(clip, mode):
    """assess judged R1 and R3 but wrote nothing for R2, which scores as unverifiable (0 in T, an essential gap for
    the gate); the inspector was told "Uncertain judgments: none flagged", so the loop meant to re-examine uncertain
    judgments never looked for R2 (without audit nothing else does)."""
    a = assessment(s3="met")
    a["judgments"] = [j for j in a["judgments"] if j["requirement_id"] != "R2"]
    agent, model = make_agent("no_audit", full_script(assess=[a]), inspect_mode=mode)
    run(agent, clip, run_id=f"left-out-{mode}")
    opening = model.calls_for("plan" if mode == "plan" else "inspect")[0].text()
    uncertain = opening.split("Uncertain judgments:")[1]
    assert "R2" in uncertain and "none flagged" not in uncertain


def test_the_result_explains_a_requirement_without_judgment(clip):
    """A requirement the assessment never judged scores as unverifiable (R2 here: T 1.0 -> 0.5), but the result's
    reasons listed only the judgments there were, so nothing explained the lost credit."""
    a = assessment()
    a["judgments"] = [j for j in a["judgments"] if j["requirement_id"] != "R2"]
    agent, _ = make_agent("decomposed", full_script(assess=[a]))
    res = run(agent, clip, run_id="no-judgment-reason")["result"]
    assert res.T == pytest.approx(0.5)
    assert any(r.startswith("R2 unverifiable:") for r in res.reasons), res.reasons
    assert [r.split()[0] for r in res.reasons[:3]] == ["R1", "R2", "R3"]  # contract order
