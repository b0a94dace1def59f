"""Every prompt file is rendered by the code that uses it, with the variables that code passes (`prompts.render`
raises KeyError on a placeholder left unfilled or a variable the template lacks): the agent stages through their
nodes in scripted runs (tools mode with a repair and a final check, plan mode, direct), the eval prompts (judge,
vqa) by tests/test_eval_judge.py and tests/test_eval_vqa.py. A prompt file no stage names fails here."""

from __future__ import annotations

from importlib import resources

from graph_scripts import CLEAN_AUDIT, assessment, full_script, make_agent, run

from evals.judge import JUDGE_STAGE, judge_system_prompt
from evals.vqa import VQA_STAGE
from prompts import STAGES, placeholders, render


def test_every_prompt_file_belongs_to_a_stage():
    files = {p.name.removesuffix(".md") for p in resources.files("prompts").iterdir() if p.name.endswith(".md")}
    assert files == {*STAGES, JUDGE_STAGE, VQA_STAGE}


def test_every_agent_stage_prompt_is_rendered_by_its_node(clip):
    dirty = {"missing_requirements": ["R2"], "invented_conditions": [], "contradictions": []}
    gap = assessment(s2="not_met")
    seen: set[str] = set()
    for preset, mode, script in (
            ("full", "tools", full_script(audit=[dirty, CLEAN_AUDIT], reflect=[gap], repair=[gap])),
            ("full", "plan", full_script()),
            ("direct", "tools", full_script())):
        agent, model = make_agent(preset, script, inspect_mode=mode)
        result = run(agent, clip, run_id=f"prompts-{preset}-{mode}")["result"]
        assert result.status != "ineligible", result.reasons
        seen |= {c.stage for c in model.calls}
    assert seen == set(STAGES)


def test_the_eval_prompts_render_with_what_their_callers_pass():
    assert judge_system_prompt().startswith(f"# stage: {JUDGE_STAGE}")
    assert placeholders(VQA_STAGE) == {"n_frames"}  # evals.vqa renders it with n_frames only
    assert "8 frames" in render(VQA_STAGE, n_frames=8)
