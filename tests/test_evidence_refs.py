"""A judgment's evidence frames are frames the model was shown in the run (graph.nodes.common.shown_frames): the
uniform sample, the frames the inspection tools returned and the images reflect, repair and final_check sent. They
were checked against the clip's range only, so a judgment could cite a frame the model never saw; such a frame is
now dropped with a note; the statuses (so the reward) stand while a judgment keeps one of its cited frames, and a
met or partial judgment left with none is scored as unverifiable."""

from __future__ import annotations

import pytest
from graph_scripts import CLEAN_AUDIT, assessment, full_script, make_agent, moving_square, run, tool_call

from tools.sampling import uniform_indices

N = 65
UNSAMPLED = sorted(set(range(N)) - set(uniform_indices(N, 32)))  # 1, 3, 5, 7, 9, 11, ... (the sample is 0, 2, 4, ...)


@pytest.fixture(scope="module")
def clip65(tmp_path_factory):
    """A 65-frame clip: the 32-frame sample leaves out every other frame, so a cited frame may be one never shown."""
    return moving_square(tmp_path_factory.mktemp("clips") / "square65.mp4", frames=N)


def test_assess_drops_the_frames_it_was_not_shown(clip):
    """The 33-frame clip's sample leaves out frame 16: assess saw frames 15 and 17 only, yet its judgments could
    cite 16 as evidence."""
    a = assessment(frames=(0, 16, 32))
    a["judgments"][2]["evidence_frames"] = [16]
    agent, _ = make_agent("decomposed", full_script(assess=[a]))
    out = run(agent, clip)
    assert 16 not in out["sample"]
    got = out["assessment"]
    assert [got.judgment(r).evidence_frames for r in ("R1", "R2", "R3")] == [[0, 32], [0, 32], []]
    # R2 keeps frames: its status stands; R3 (not essential) has no cited frame left: unverifiable
    assert [got.judgment(r).status for r in ("R1", "R2", "R3")] == ["met", "met", "unverifiable"]
    reasons = out["result"].reasons
    assert "assess: R2 cited frames [16] the model was not shown; dropped" in reasons
    assert "assess: R3 cited frames [16] the model was not shown; dropped (partial now cites no frame)" in reasons
    assert "assess: R3 partial scored as unverifiable: it cites no frame the model was shown" in reasons
    assert out["result"].T == pytest.approx(1.0)


def test_frames_of_the_inspection_tools_and_of_reflect_count_as_shown(clip65):
    """reflect may cite a frame an inspection tool returned (3, a crop of 5) or a surprise window frame it was
    shown (15, the window's last context frame), not one nobody showed (7); a later repair likewise keeps the
    frames it or an earlier stage showed (3, 5, 15) and drops others (9)."""
    a, b, c, d = UNSAMPLED[1], UNSAMPLED[2], UNSAMPLED[3], UNSAMPLED[4]  # 3, 5, 7, 9
    inspect = [tool_call("view_frames", {"frames": [a]}, "c1"),
               tool_call("view_crop", {"frame": b, "box": [0.1, 0.1, 0.6, 0.6]}, "c2"), "checked"]
    revised = assessment(frames=(0,))
    for j, frames in zip(revised["judgments"], ([a], [b, c], [15]), strict=True):
        j["evidence_frames"] = frames
    repaired = assessment(frames=(0,))
    for j, frames in zip(repaired["judgments"], ([a], [b, d], [15]), strict=True):
        j["evidence_frames"] = frames
    dirty = {"missing_requirements": [], "invented_conditions": [], "contradictions": ["R2 contradicts frames"]}
    agent, _ = make_agent("full", full_script(inspect=inspect, reflect=[revised], audit=[dirty, CLEAN_AUDIT],
                                              repair=[repaired]))
    out = run(agent, clip65)
    after_reflect = out["assessments"][1]
    assert [after_reflect.judgment(r).evidence_frames for r in ("R1", "R2", "R3")] == [[a], [b], [15]]
    assert f"reflect: R2 cited frames [{c}] the model was not shown; dropped" in out["notes"]
    assert [out["assessment"].judgment(r).evidence_frames for r in ("R1", "R2", "R3")] == [[a], [b], [15]]
    assert f"repair: R2 cited frames [{d}] the model was not shown; dropped" in out["notes"]
    assert out["result"].status == "scored"


def test_final_check_drops_the_frames_it_was_not_shown(clip65):
    """The final check's evidence frames were checked against the clip's range only."""
    gap = assessment(s2="not_met", frames=(0, 64))
    final = {"failure_established": True, "essential_unverifiable": False, "rationale": "the block stops short",
             "evidence_frames": [64, UNSAMPLED[5]]}
    out = run(make_agent("full", full_script(reflect=[gap], final_check=[final]))[0], clip65)
    assert out["final_check"].evidence_frames == [64] and out["final_check"].failure_established
    assert f"final_check: cited frames [{UNSAMPLED[5]}] the model was not shown; dropped" in out["notes"]
    assert out["result"].status == "zero"
    step = next(s for s in out["steps"] if s["node"] == "final_check")
    assert "1 unseen evidence frame(s) dropped" in step["decision"]


def test_a_verdict_whose_cited_frames_were_all_dropped_is_unverifiable(clip):
    """R2 (essential) judged met citing only frame 16 (not in the 33-frame clip's sample) and frame 99 (past its
    end): both are dropped, so no evidence is left for the verdict, yet it stayed met and earned full credit
    (T = 1.0). A met or partial verdict with no surviving evidence is unverified: it is scored as unverifiable
    (with a note), as inspect, final_check and the gate read that status. A verdict keeping one frame stands (R1),
    and a not_met one loses no credit and stays (R3)."""
    a = assessment(s3="not_met", frames=(0, 32))
    a["judgments"][0]["evidence_frames"] = [0, 99]
    a["judgments"][1]["evidence_frames"] = [16, 99]
    a["judgments"][2]["evidence_frames"] = [99]
    agent, _ = make_agent("decomposed", full_script(assess=[a]))
    out = run(agent, clip, run_id="all-dropped")
    got = out["assessment"]
    assert [got.judgment(r).status for r in ("R1", "R2", "R3")] == ["met", "unverifiable", "not_met"]
    assert [got.judgment(r).evidence_frames for r in ("R1", "R2", "R3")] == [[0], [], []]
    res = out["result"]
    assert res.T == pytest.approx(0.5)
    assert "assess: R2 met scored as unverifiable: it cites no frame the model was shown" in res.reasons
    assert not any(n.startswith("assess: R3 not_met scored") for n in out["notes"])


def test_a_repair_restating_a_verdict_with_no_surviving_frame_keeps_the_backed_one(clip):
    """The repair writes R2 met again but cites only frame 99 (past the clip's end): its met is unverifiable, and the
    image-backed rule (`graph.nodes.revision.guard_judgments`) keeps the earlier met, whose frames the model was shown,
    with one note saying so (not "scored as unverifiable" and then "kept met (change to unverifiable ...)")."""
    repaired = assessment(frames=(0, 32))
    repaired["judgments"][1]["evidence_frames"] = [99]
    dirty = {"missing_requirements": [], "invented_conditions": [], "contradictions": ["R2 contradicts frame 32"]}
    agent, _ = make_agent("full", full_script(audit=[dirty, CLEAN_AUDIT], repair=[repaired]))
    out = run(agent, clip, run_id="repair-all-dropped")
    before = out["assessments"][-2].judgment("R2")
    got = out["assessment"].judgment("R2")
    assert got.status == "met" and got.evidence_frames == before.evidence_frames and got.evidence_frames
    assert f"repair: R2 kept met with its earlier evidence frames {before.evidence_frames} (restated citing no " \
        "frame shown)" in out["notes"]
    assert not any(n.startswith("repair: R2 met scored") for n in out["notes"])
    assert out["result"].status == "scored" and out["result"].T == pytest.approx(1.0)
