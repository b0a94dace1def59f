"""What the image-backed repair may change (`graph.nodes.revision.guard_judgments`, `graph.nodes.revision.guard_levels`) and
which frames repair and final check look at."""

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
    assert out["assessment"].judgment("R2").status == "met"  # assessment() cites frames 0, 17, 32: shown
    assert out["result"].reward == pytest.approx(0.975)


def test_pick_frames_keeps_the_frames_it_must_and_thins_the_rest():
    from graph.nodes.common import pick_frames

    assert pick_frames(range(0, 100, 5), range(0, 200, 10), 6, keep=[180, 190, 199]) == [0, 30, 65, 180, 190, 199]  # 20 candidates, room 3: k*20/3
    assert pick_frames([3, 1], [0, 10, 20, 30], 4) == [0, 1, 3, 20]  # topped up evenly from the fallback
    assert pick_frames([5], [], 2, keep=[7, 8, 9]) == [8, 9]  # more to keep than room: the last ones


def test_the_final_check_always_sees_the_end_of_the_clip():
    """With many evidence frames of an essential gap, thinning them dropped the clip's last frames, which
    the final check (deciding F, and so R = 0) is meant to see."""
    import tempfile
    from pathlib import Path

    from graph_scripts import moving_square

    from tools.sampling import uniform_indices

    long_clip = moving_square(Path(tempfile.mkdtemp()) / "long.mp4", frames=200)
    # 29 evidence frames, all shown (sampled: a judgment keeps only frames the model saw), none of the last 3
    gap = assessment(s2="not_met", frames=tuple(uniform_indices(200, 32)[:-3]))
    agent, _ = make_agent("full", full_script(assess=[gap], reflect=[gap], audit=[CLEAN_AUDIT]))
    out = run(agent, long_clip)
    step = next(s for s in out["steps"] if s["node"] == "final_check")
    assert set(out["sample"][-3:]) <= set(step["frames"]) and len(step["frames"]) == 16


def test_the_repair_shows_the_frames_of_a_requirement_an_audit_finding_names_in_lower_case(clip):
    """Audit texts were searched for contract ids case-sensitively, while missing ids are read up to case: with
    R1 missing and "r3 ..." contradicted, R3's evidence frame (14) was not among the repair's images, so the
    repair's R3 fix citing it was undone as not image-backed."""
    from graph_scripts import judgments

    before = judgments("met", "met", "partial")
    before[0]["evidence_frames"], before[2]["evidence_frames"] = [0], [14]
    fixed = [dict(j) for j in before]
    fixed[2] = {**fixed[2], "status": "met"}
    audit = {"missing_requirements": ["R1"], "invented_conditions": [],
             "contradictions": ["r3: the rationale says partial but frame 14 shows the push finished"]}
    body = {"physical_level": 5, "visual_level": 4}
    script = full_script(assess=[{**body, "judgments": before}], reflect=[{**body, "judgments": before}],
                         audit=[audit, CLEAN_AUDIT], repair=[{**body, "judgments": fixed}])
    agent, model = make_agent("full", script)
    out = run(agent, clip)
    step = next(s for s in out["steps"] if s["node"] == "repair")
    assert 14 in step["frames"] and 0 in step["frames"]
    assert out["assessment"].judgment("R3").status == "met"
    assert not any(n.startswith("repair: R3 kept") for n in out["notes"])


def test_involved_ids_read_audit_texts_up_to_case_and_at_any_id_edge():
    from graph.nodes.audit import involved_ids
    from graph.schemas import AuditReport, TaskContract

    def contract(*ids):
        return TaskContract.model_validate({"requirements": [{"id": i, "kind": "action", "text": "x"} for i in ids]})

    def report(*lines, missing=()):
        return AuditReport(missing_requirements=list(missing), contradictions=list(lines))

    assert involved_ids(report("r2 and R3 disagree", missing=["R1"]), contract("R1", "R2", "R3", "R10")) == \
        ["R1", "R2", "R3"]
    assert involved_ids(report("R1 says so"), contract("R1", "R10")) == ["R1"]  # R1 is not R10's prefix match
    assert involved_ids(report("see (a) and (b)."), contract("(a)", "(b)", "(c)")) == ["(a)", "(b)"]
    # ids differing only in case are refused in a contract (tests/test_contract_case_ids.py): none to tell apart
