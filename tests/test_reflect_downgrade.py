"""A reflect that lowers a judgment's credit is the model's own verdict on the evidence, like its moves to not_met or
unverifiable (`graph.nodes.revision`, guard mode "credit"): a met lowered to partial while citing a frame the model
was not shown kept the earlier met, so the reward paid full credit for a requirement the final assessment's author
called partial."""

from __future__ import annotations

import pytest
from graph_scripts import assessment, full_script, make_agent, run


def test_reflect_lowering_met_to_partial_on_an_unshown_frame_pays_partial(clip):
    revised = assessment(s2="partial")
    revised["judgments"][1]["evidence_frames"] = [16]  # not in the 33-frame clip's sample, not inspected
    agent, _ = make_agent("no_wmreward", full_script(reflect=[revised]))
    out = run(agent, clip, run_id="reflect-lowered")
    before, after = out["assessments"][0].judgment("R2"), out["assessment"].judgment("R2")
    assert before.status == "met"
    assert after.status == "partial" and after.evidence_frames == before.evidence_frames
    assert out["result"].T == pytest.approx(0.75)  # R1 met, R2 partial (R3 is not essential)
    assert any(n.startswith("reflect: R2 lowered to partial") for n in out["notes"])


def test_the_credit_guard_keeps_the_lower_of_an_unbacked_change():
    """Pure: an unbacked change in "credit" mode never ends with more credit than the model's own verdict nor more
    than the earlier, image-backed one; "changes" mode (repair) still keeps the earlier judgment."""
    from graph.nodes.revision import guard_judgments
    from graph.schemas import Assessment

    def a(*judged):
        return Assessment.model_validate({"physical_level": 4, "visual_level": 4, "judgments": [
            {"requirement_id": r, "status": s, "evidence_frames": f} for r, s, f in judged]})

    before = a(("R1", "met", [3]), ("R2", "partial", [3]), ("R3", "met", [3]))
    after = a(("R1", "partial", [9]), ("R2", "met", [9]), ("R3", "partial", []))
    credit, _ = guard_judgments(before, after, {3}, "s", "credit")
    assert [(j.status, j.evidence_frames) for j in credit.judgments] == [
        ("partial", [3]), ("partial", [3]), ("partial", [3])]
    changes, _ = guard_judgments(before, after, {3}, "s", "changes")
    assert [j.status for j in changes.judgments] == ["met", "partial", "met"]
