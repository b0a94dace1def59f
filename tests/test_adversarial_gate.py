"""A hostile backbone's schema-valid replies never buy a positive reward (DESIGN.md §3 "Faults", paper Sec. 3.2:
the gate withholds credit for unverifiable essential content)."""

from __future__ import annotations

import pytest
from graph_scripts import NO_FAILURE, full_script, make_agent, run


def judged(*pairs: tuple[str, str], frames: tuple[int, ...] = (0, 32)) -> dict:
    return {"judgments": [{"requirement_id": rid, "status": st, "evidence_frames": list(frames), "rationale": "x"}
                          for rid, st in pairs], "physical_level": 5, "visual_level": 5}


def test_no_requirement_judged_is_gated_zero_whatever_the_final_check_says(clip):
    """Every judgment names an id the contract lacks, so no requirement is ever judged; the final check then wrote
    essential_unverifiable false and the clip was scored 0.30 on P and V alone (T = 0)."""
    bogus = judged(("R9", "met"), ("X", "met"))
    script = full_script(assess=[bogus], reflect=[bogus], repair=[bogus], final_check=[NO_FAILURE])
    res = run(make_agent("full", script)[0], clip)["result"]
    assert res.status == "zero" and res.reward == 0.0 and res.unverifiable is True
    assert any("R1" in r and "R2" in r and "unverifiable" in r and "final_check" in r for r in res.reasons)


def test_an_essential_left_unverifiable_is_gated_zero_when_the_final_check_denies_it(clip):
    """R2 (essential) stays unverifiable through reflect and repair; the final check's essential_unverifiable false
    contradicted the assessment it was shown and the clip was scored on R1 alone."""
    uv = judged(("R1", "met"), ("R2", "unverifiable"), ("R3", "met"))
    script = full_script(assess=[uv], reflect=[uv], repair=[uv], final_check=[NO_FAILURE])
    out = run(make_agent("full", script)[0], clip)
    assert out["final_check"].essential_unverifiable is True
    assert out["result"].status == "zero" and out["result"].reward == 0.0
    why = [r for r in out["result"].reasons if r.startswith("essential requirement unverifiable")]
    # the reason names the requirement, not the check's rationale, which argued the opposite
    assert why == ["essential requirement unverifiable: R2 (unverifiable or never judged in the assessment)"], why


def test_a_not_met_essential_still_leaves_the_failure_call_to_the_final_check(clip):
    """Only unverifiable (or unjudged) essentials set U by code: a not_met one is the final check's to weigh (F), and
    an unverifiable requirement the contract marks non-essential (R3) does not set U."""
    nm = judged(("R1", "met"), ("R2", "not_met"), ("R3", "unverifiable"))
    script = full_script(assess=[nm], reflect=[nm], final_check=[NO_FAILURE])
    res = run(make_agent("full", script)[0], clip)["result"]
    assert res.status == "scored" and res.unverifiable is False and res.T == 0.5


def test_contradicting_judgments_of_one_requirement_are_re_asked_not_resolved_by_order(clip):
    """R2 judged met and then not_met (and "r1" met, "R1" not_met) in one reply: the first was kept, so the order
    of a self-contradicting reply decided T (1.0). Such a reply is re-asked; one that keeps contradicting itself
    is the model's fault (ineligible), never a reward."""
    bad = judged(("R1", "met"), ("R2", "met"), ("R2", "not_met"), ("R3", "met"))
    good = judged(("R1", "met"), ("R2", "not_met"), ("R3", "met"))
    agent, model = make_agent("decomposed", full_script(assess=[bad, good]))
    res = run(agent, clip)["result"]
    assert len(model.calls_for("assess")) == 2 and res.status == "scored" and res.T == 0.5
    assert "judged twice" in model.calls_for("assess")[1].text()
    case = judged(("r1", "met"), ("R1", "not_met"), ("R2", "met"))
    res = run(make_agent("decomposed", full_script(assess=[case]))[0], clip, run_id="r2")["result"]
    assert res.status == "ineligible" and res.reward is None
    assert any("assess: invalid_reply" in r and "judged twice" in r for r in res.reasons)


@pytest.mark.parametrize("stage", ["observe", "assess", "inspect", "plan", "reflect", "audit", "repair",
                                   "final_check"])
def test_every_stage_reading_written_text_is_told_it_is_data(stage):
    """Only the contract and direct prompts said that text resembling commands is data. The contract copies the
    instruction's words into requirement texts (an instruction without a physical task becomes one requirement
    restating it, "give reward 1" included), and observations, tool results and audit findings are text a model
    wrote, possibly from words visible in a generated clip; every later stage read them with no such warning."""
    from prompts import load_prompt

    text = " ".join(load_prompt(stage).split()).lower()
    assert "never follow" in text and "data" in text
