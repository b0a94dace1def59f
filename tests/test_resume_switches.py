"""A run recorded with a switch this agent's version no longer has: on, the run used a module the agent cannot run,
so its resume is refused (a whole-dict comparison refused it, and the per-name one let it through); off, the run
never used it and resumes. A switch added since says nothing (`test_resume_backbone`)."""

from __future__ import annotations

from graph.config import AgentConfig, run_settings
from graph.thread_guard import resume_refusal


def _values(switches):
    cfg = AgentConfig(preset="full").resolved()
    return {**run_settings(cfg), "switches": switches, "steps": [{"node": "assess"}]}


def test_a_run_with_a_switch_since_removed_on_is_refused_naming_it():
    cfg = AgentConfig(preset="full").resolved()
    refused = resume_refusal("old", _values({**cfg.switches(), "legacy_module": True}), run_settings(cfg))
    assert refused is not None and "switch legacy_module True (agent has no such switch)" in str(refused)


def test_a_run_with_a_switch_since_removed_off_resumes():
    cfg = AgentConfig(preset="full").resolved()
    assert resume_refusal("old", _values({**cfg.switches(), "legacy_module": False}), run_settings(cfg)) is None
