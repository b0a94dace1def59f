"""Credit needs evidence the model was shown (paper Sec. 3.2: each requirement's judgment comes with the frames that
back it). A met or partial judgment citing no frame at all earned full credit, while one whose
cited frames were all dropped was scored as unverifiable (`graph.nodes.common.score_uncited`); a revision (reflect,
repair) restating a verdict without a frame shown keeps the earlier, image-backed one
(`graph.nodes.revision.guard_judgments`), with one note saying so."""

from __future__ import annotations

import pytest
from graph_scripts import CLEAN_AUDIT, assessment, full_script, make_agent, run

from prompts import load_prompt


def test_a_met_judgment_citing_no_frame_is_unverifiable(clip):
    """R2 (essential) judged met with no evidence frame: it paid T = 1.0 with nothing to back it."""
    a = assessment(s3="not_met")
    a["judgments"][1]["evidence_frames"] = []
    a["judgments"][2]["evidence_frames"] = []
    agent, _ = make_agent("decomposed", full_script(assess=[a]))
    out = run(agent, clip, run_id="uncited")
    got = out["assessment"]
    assert [got.judgment(r).status for r in ("R1", "R2", "R3")] == ["met", "unverifiable", "not_met"]
    assert out["result"].T == pytest.approx(0.5)
    assert "assess: R2 met scored as unverifiable: it cites no frame the model was shown" in out["result"].reasons
    assert not any(n.startswith("assess: R3") for n in out["notes"])  # not_met earns no credit: left as written


@pytest.mark.parametrize("mode", ["tools", "plan"])
def test_an_uncited_met_is_pointed_at_by_the_inspection(clip, mode):
    """A confident met citing no frame is unverifiable, so inspection re-examines it (and may cite frames then)."""
    a = assessment(s3="met")
    a["judgments"][1] = {**a["judgments"][1], "evidence_frames": [], "confidence": 0.95}
    agent, model = make_agent("no_audit", full_script(assess=[a]), inspect_mode=mode)
    run(agent, clip, run_id=f"uncited-{mode}")
    opening = model.calls_for("plan" if mode == "plan" else "inspect")[0].text()
    assert "R2" in opening.split("Uncertain judgments:")[1]


def test_reflect_restating_met_on_unshown_frames_keeps_the_backed_verdict(clip):
    """Reflect writes R2 met again citing only frame 16 (not in the 33-frame clip's sample, not inspected): the met
    was scored as unverifiable although assess's met rests on frames the model was shown (T 1.0 -> 0.5, and an
    essential gap for the final check). Reflect keeps the earlier judgment, as repair does. (Without WMReward: its
    window shows frame 16 in reflect.)"""
    revised = assessment()
    revised["judgments"][1]["evidence_frames"] = [16]
    agent, model = make_agent("no_wmreward", full_script(reflect=[revised]))
    out = run(agent, clip, run_id="reflect-unshown")
    before, after = out["assessments"][0].judgment("R2"), out["assessments"][1].judgment("R2")
    assert after.status == "met" and after.evidence_frames == before.evidence_frames and after.evidence_frames
    notes = [n for n in out["notes"] if n.startswith("reflect: R2")]
    assert notes == ["reflect: R2 cited frames [16] the model was not shown; dropped (met now cites no frame)",
                     f"reflect: R2 kept met with its earlier evidence frames {before.evidence_frames} (restated "
                     "citing no frame shown)"]
    assert out["result"].status == "scored" and out["result"].T == pytest.approx(1.0)
    assert model.calls_for("final_check") == []


def test_reflect_downgrades_stand_when_they_cite_no_frame_shown(clip):
    """Reflect's own downgrades are its verdict on the evidence: its change of R1 to unverifiable, citing nothing,
    stands, and so does its change of R2 to partial citing an unshown frame, on met's earlier frames (it kept met,
    more credit than the revision gave; tests/test_reflect_downgrade.py)."""
    revised = assessment(s1="unverifiable", s2="partial")
    revised["judgments"][0]["evidence_frames"] = []
    revised["judgments"][1]["evidence_frames"] = [16]
    agent, _ = make_agent("no_wmreward", full_script(reflect=[revised], final_check=[
        {"failure_established": False, "essential_unverifiable": True, "rationale": "R1 hidden"}]))
    out = run(agent, clip, run_id="reflect-partial")
    after = out["assessments"][1]
    before = out["assessments"][0].judgment("R2")
    assert after.judgment("R1").status == "unverifiable" and after.judgment("R2").status == "partial"
    assert after.judgment("R2").evidence_frames == before.evidence_frames
    assert (f"reflect: R2 lowered to partial with the earlier evidence frames {before.evidence_frames} (it cited no "
            "frame shown; the earlier met is not restored)") in out["notes"]
    assert not any(n.startswith("reflect: R1") for n in out["notes"])


def test_a_repair_restating_met_on_no_frame_says_once_that_the_backed_met_is_kept(clip):
    """The repair restated R2 met citing only frame 99 (past the clip's end): the notes read "R2 met scored as
    unverifiable ..." and then "R2 kept met (change to unverifiable cited no frame shown)", a change the model never
    made. One note now says what happened."""
    repaired = assessment()
    repaired["judgments"][1]["evidence_frames"] = [99]
    dirty = {"missing_requirements": [], "invented_conditions": [], "contradictions": ["R2 contradicts frame 32"]}
    agent, _ = make_agent("full", full_script(audit=[dirty, CLEAN_AUDIT], repair=[repaired]))
    out = run(agent, clip, run_id="repair-once")
    before = out["assessments"][-2].judgment("R2")
    assert out["assessment"].judgment("R2").status == "met"
    notes = [n for n in out["notes"] if n.startswith("repair: R2")]
    assert notes == ["repair: R2 cited frames [99] outside the clip (0..32); dropped",
                     f"repair: R2 kept met with its earlier evidence frames {before.evidence_frames} (restated "
                     "citing no frame shown)"]


@pytest.mark.parametrize("stage", ["assess", "reflect", "repair"])
def test_the_prompts_ask_for_a_shown_frame_behind_every_met_or_partial(stage):
    text = " ".join(load_prompt(stage).split())
    assert "A met or partial judgment must cite at least one frame you were shown" in text
    assert "counts as unverifiable" in text


def test_the_inspect_prompts_point_at_uncited_credit():
    for stage in ("inspect", "plan"):
        text = " ".join(load_prompt(stage).split())
        assert "met or partial judgment that cites no frame shown counts as unverifiable" in text, stage


def test_the_guard_modes_differ_only_on_an_uncredited_change():
    """Pure: "changes" (repair) keeps the earlier judgment for any status change citing no frame shown; "credit"
    (reflect) only when the new judgment claims credit, and a lowered credit (met -> partial) stands on the earlier
    frames. Both keep it for a restated met that cites nothing, and add a new credited judgment citing nothing as
    unverifiable."""
    from graph.nodes.revision import guard_judgments
    from graph.schemas import Assessment

    def a(*judged):
        return Assessment.model_validate({"physical_level": 4, "visual_level": 4, "judgments": [
            {"requirement_id": r, "status": s, "evidence_frames": f} for r, s, f in judged]})

    before = a(("R1", "met", [3]), ("R2", "met", [3]), ("R3", "met", [3]))
    after = a(("R1", "unverifiable", []), ("R2", "met", []), ("R3", "partial", [9]), ("R4", "met", []))
    shown = {3}
    for guard, r1, r3 in (("changes", "met", "met"), ("credit", "unverifiable", "partial")):
        got, notes = guard_judgments(before, after, shown, "s", guard)
        assert [j.status for j in got.judgments] == [r1, "met", r3, "unverifiable"], guard
        assert got.judgment("R2").evidence_frames == [3]
        assert "s: R2 kept met with its earlier evidence frames [3] (restated citing no frame shown)" in notes
        assert ("s: R3 kept met (change to partial cited no frame shown)" if guard == "changes" else
                "s: R3 lowered to partial with the earlier evidence frames [3] (it cited no frame shown; the earlier met "
                "is not restored)") in notes
        assert "s: R4 added as unverifiable (met cited no frame shown)" in notes
