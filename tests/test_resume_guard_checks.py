"""The resume guard checks a resume against the run settings of the call (`graph.thread_guard._refusal`): a passed
context's are computed only for a run that recorded its config (`"preset"`, the quality step's), never for a new input
(checked for a held run only) or a thread with nothing recorded; the public `resume_refusal` lets through a run that
recorded no config and an agent that has no settings. The one check for a recorded config must hold for both."""

from __future__ import annotations

from typing import Any

from graph import AgentConfig
from graph.backbone import Backbone
from graph.context import RunContext, tool_provider
from graph.testing import ScriptedChatModel
from graph.thread_guard import ResumeMismatchError, ThreadInUseError, _refusal, resume_refusal

CALLS: list[str] = []
"""The calls of `_Counted.run_settings`."""


class _Counted(RunContext):
    """A RunContext that counts the calls of its `run_settings` in CALLS."""

    def run_settings(self) -> dict[str, Any]:
        CALLS.append("run_settings")
        return super().run_settings()


def _context(preset: str = "full") -> _Counted:
    return _Counted(backbone=Backbone(ScriptedChatModel({}), model_name="model-a"),
                    config=AgentConfig(preset=preset).resolved(), tools=tool_provider(None))


def test_a_passed_contexts_settings_are_computed_only_for_a_recorded_run() -> None:
    agent = _context().run_settings()
    CALLS.clear()
    for values in ({}, {"steps": []}, {"overrides": {}}):  # a new thread, a run before its quality step
        assert _refusal("t", None, values, agent, _context()) is None
    assert _refusal("t", {"video": "v", "instruction": "i"}, {}, agent, _context()) is None  # a new input
    assert CALLS == []
    assert _refusal("t", None, {"preset": "full"}, agent, _context()) is None
    assert CALLS == ["run_settings"]
    refused = _refusal("t", None, {"preset": "full"}, agent, _context("no_audit"))
    assert isinstance(refused, ResumeMismatchError) and "preset 'full' (agent 'no_audit')" in str(refused)
    assert CALLS == ["run_settings"] * 2


def test_no_settings_and_no_recorded_config_are_let_through() -> None:
    CALLS.clear()
    assert _refusal("t", None, {"preset": "no_audit"}, None, _context()) is None  # an agent without settings
    assert CALLS == []
    assert resume_refusal("t", {"preset": "no_audit"}, None) is None
    agent = _context().run_settings()
    assert resume_refusal("t", {}, agent) is None
    assert resume_refusal("t", {"steps": [], "overrides": {}}, agent) is None
    assert isinstance(resume_refusal("t", {"preset": "no_audit"}, agent), ResumeMismatchError)


def test_a_new_input_on_a_held_thread_is_refused_without_the_settings() -> None:
    CALLS.clear()
    refused = _refusal("t", {"video": "v"}, {"preset": "full", "steps": [{"stage": "assess"}]}, {}, _context())
    assert isinstance(refused, ThreadInUseError) and CALLS == []
