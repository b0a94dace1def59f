"""Score mapping, gate, presets and prompts: pure code against hand-computed values."""

from __future__ import annotations

import pytest

from graph.config import PRESETS, AgentConfig, preset_switches, presets_using
from graph.gate import diagnostic_reward, essential_gaps, gate_reward, level_to_unit, score_mapping
from graph.schemas import Assessment, AuditReport, RewardResult, TaskContract
from prompts import STAGES, load_prompt, render, stage_of


def _contract(essentials=(True, True, False)):
    return TaskContract.model_validate({"requirements": [
        {"id": f"R{i + 1}", "kind": "action", "text": f"req {i + 1}", "essential": e}
        for i, e in enumerate(essentials)]})


def _assessment(statuses, phys=3, vis=5):
    return Assessment.model_validate({"judgments": [
        {"requirement_id": f"R{i + 1}", "status": s} for i, s in enumerate(statuses) if s is not None],
        "physical_level": phys, "visual_level": vis})


def test_diagnostic_reward_hand_computed():
    # (0.7*1 + 0.2*1 + 0.1*1) * (0.5 + 0.5) = 1
    assert diagnostic_reward(1, 1, 1) == pytest.approx(1.0)
    # (0.7*0.5 + 0.2*0.5 + 0.1*1) * 0.75 = 0.55 * 0.75 = 0.4125
    assert diagnostic_reward(0.5, 0.5, 1.0) == pytest.approx(0.4125)
    # P = 0 halves everything: (0.7*1 + 0 + 0.1*0.5) * 0.5 = 0.375
    assert diagnostic_reward(1.0, 0.0, 0.5) == pytest.approx(0.375)
    assert diagnostic_reward(0, 0, 0) == 0.0


@pytest.mark.parametrize("bad", [(-0.1, 0, 0), (0, 1.5, 0), (0, 0, float("nan"))])
def test_diagnostic_reward_rejects_out_of_range(bad):
    with pytest.raises(ValueError):
        diagnostic_reward(*bad)


def test_gate_reward_cases():
    assert gate_reward(False, False, False, 1, 1, 1) is None
    assert gate_reward(False, True, True, None, None, None) is None
    assert gate_reward(True, True, False, 1, 1, 1) == 0.0
    assert gate_reward(True, False, True, 1, 1, 1) == 0.0
    assert gate_reward(True, False, False, 0.5, 0.5, 1.0) == pytest.approx(0.4125)
    with pytest.raises(ValueError):
        gate_reward(True, False, False, None, 0.5, 0.5)


def test_level_mapping_linear():
    assert [level_to_unit(k) for k in range(1, 6)] == [0.0, 0.25, 0.5, 0.75, 1.0]
    for bad in (0, 6, 2.5, True):
        with pytest.raises(ValueError):
            level_to_unit(bad)


def test_score_mapping_essential_only():
    # essentials R1 met (1), R2 partial (0.5); R3 (not essential) ignored -> T = 0.75; P = (3-1)/4; V = 1
    t, p, v = score_mapping(_assessment(["met", "partial", "not_met"]), _contract())
    assert (t, p, v) == (pytest.approx(0.75), 0.5, 1.0)


def test_score_mapping_missing_and_unverifiable_count_zero():
    t, _, _ = score_mapping(_assessment(["unverifiable", None, "met"]), _contract())
    assert t == 0.0
    assert essential_gaps(_assessment(["unverifiable", None, "met"]), _contract()) == ["R1", "R2"]
    t, _, _ = score_mapping(_assessment(["met", "not_met", "met"]), _contract())
    assert t == pytest.approx(0.5)


def test_score_mapping_without_essentials_uses_all():
    t, _, _ = score_mapping(_assessment(["met", "partial", "not_met"]), _contract((False, False, False)))
    assert t == pytest.approx(0.5)
    # ... and so does the failure gate: a contract without essentials still has gaps to check
    assert essential_gaps(_assessment(["met", "partial", "not_met"]), _contract((False, False, False))) == ["R3"]
    assert essential_gaps(_assessment(["met", "partial", None]), _contract((False, False, False))) == ["R3"]
    assert essential_gaps(_assessment(["met", "partial", "not_met"]), _contract((True, True, False))) == []


def test_full_pipeline_number():
    # T = 0.75, P = 0.5, V = 1 -> (0.525 + 0.1 + 0.1) * 0.75 = 0.54375
    t, p, v = score_mapping(_assessment(["met", "partial", "met"]), _contract())
    assert gate_reward(True, False, False, t, p, v) == pytest.approx(0.54375)


def test_audit_clean_is_recomputed():
    assert AuditReport(clean=True, missing_requirements=["R1"]).clean is False
    assert AuditReport().clean is True  # `clean: false` naming no issue is refused (test_audit_unclean_without_issue)


def test_reward_result_consistency():
    with pytest.raises(ValueError):
        RewardResult(status="ineligible", reward=0.3, reasons=["x"])
    with pytest.raises(ValueError):
        RewardResult(status="ineligible", reward=None, reasons=[])
    with pytest.raises(ValueError):
        RewardResult(status="scored", reward=None)


def test_presets_cumulative_and_removals():
    assert len(PRESETS) == 14
    order = ["direct", "structured", "decomposed", "task_blind", "visual_verify", "motion", "wmreward",
             "audit_no_gate", "full"]
    counts = [sum(preset_switches(p).values()) for p in order]
    assert counts == list(range(9))
    assert all(preset_switches("full").values())
    gated = [p for p in PRESETS if preset_switches(p)["failure_gate"]]
    assert sorted(gated) == sorted(["full", "no_task_blind", "no_visual_verify", "no_wmreward", "no_audit",
                                    "no_motion"])
    assert preset_switches("no_motion") == {**preset_switches("full"), "motion": False}
    assert preset_switches("audit_no_gate")["audit"] and not preset_switches("audit_no_gate")["failure_gate"]
    assert presets_using("wmreward") == ("wmreward", "audit_no_gate", "full", "no_task_blind", "no_visual_verify",
                                         "no_audit", "no_motion")
    with pytest.raises(ValueError, match="unknown switch 'surprise'"):
        presets_using("surprise")


def test_config_validation_and_overrides():
    with pytest.raises(ValueError):
        AgentConfig(preset="nope")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        AgentConfig(max_repair_rounds=4)
    with pytest.raises(ValueError, match="max_instruction_chars must be <= 4000"):
        AgentConfig(preset="structured", max_instruction_chars=6000)  # its one requirement would fail validation
    with pytest.raises(ValueError):
        AgentConfig(inspect_mode="chat")  # type: ignore[arg-type]
    cfg = AgentConfig.from_preset("full", audit=False)
    assert cfg.switches()["audit"] is False and cfg.resolved().failure_gate is True
    assert cfg.resolved().switches() == cfg.switches()
    assert AgentConfig().observe_frames == 32


@pytest.mark.parametrize("field", ["observe_frames", "frame_budget"])
def test_image_caps_must_fit_in_one_request(field):
    """observe/assess send every sampled frame and the inspect conversation every tool image of the run:
    a config whose counts exceed max_images_per_call would send requests the server refuses."""
    with pytest.raises(ValueError, match=f"{field} \\(64\\) exceeds max_images_per_call \\(48\\)"):
        AgentConfig(**{field: 64})
    assert getattr(AgentConfig(**{field: 64}, max_images_per_call=64), field) == 64


def test_prompts_have_stage_line_and_render_safely():
    for name in STAGES:
        assert stage_of(load_prompt(name)) == name
    text = render("observe", n_frames=32)
    assert "32 frames" in text and "{{" not in text
    with pytest.raises(KeyError):
        render("observe")
    with pytest.raises(KeyError):
        render("observe", n_frames=1, extra=2)
    with pytest.raises(KeyError):
        load_prompt("../etc/passwd")


def test_contract_without_essentials_still_faces_the_failure_gate(clip):
    """A contract that marks nothing essential (the model's call, or an instruction steering it) must not skip
    the final check: every requirement then counts as essential, in T and in the gate alike."""
    from graph_scripts import CONTRACT, assessment, full_script, make_agent, run

    contract = {"requirements": [{**r, "essential": False} for r in CONTRACT["requirements"]]}
    script = full_script(contract=[contract], reflect=[assessment(s1="not_met", s2="not_met", s3="not_met")],
                         final_check=[{"failure_established": True, "essential_unverifiable": False,
                                       "rationale": "the block never moves", "evidence_frames": [32]}])
    agent, model = make_agent("full", script)
    res = run(agent, clip)["result"]
    assert len(model.calls_for("final_check")) == 1
    assert "counts as essential" in model.calls_for("final_check")[0].text()
    assert res.status == "zero" and res.reward == 0.0 and res.failure is True and res.T == 0.0
