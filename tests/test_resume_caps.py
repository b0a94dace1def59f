"""A run records its caps in full (`graph.config.run_caps`), not only as differences from the defaults of the
version that wrote it: read against a later version's defaults, the differences misjudged a resume either way (a
run of the old default passed for one of the new, a run that set the new value explicitly was refused)."""

from __future__ import annotations

import pytest

from graph import AgentConfig
from graph.config import run_settings
from graph.thread_guard import resume_refusal


def _later_default(monkeypatch, name: str, value: int) -> None:
    """A later version whose default of `name` is `value` (what `config_overrides` reads the defaults from)."""
    monkeypatch.setattr(AgentConfig.__dataclass_fields__[name], "default", value)


def test_a_run_of_the_old_default_is_refused_by_an_agent_of_a_later_default(monkeypatch):
    values = {**run_settings(AgentConfig(preset="full").resolved()), "steps": [{"node": "assess"}]}  # 32 frames
    _later_default(monkeypatch, "observe_frames", 24)
    agent = AgentConfig(preset="full", observe_frames=24)  # that version's plain `full`: no overrides
    refused = resume_refusal("old", values, run_settings(agent.resolved()))
    assert refused is not None and "observe_frames 32 (agent 24)" in str(refused)


def test_a_run_that_set_a_later_default_explicitly_is_resumed_by_an_agent_of_it(monkeypatch):
    started = AgentConfig(preset="full", observe_frames=24)  # an override when it ran (default 32)
    values = {**run_settings(started.resolved()), "steps": [{"node": "assess"}]}
    _later_default(monkeypatch, "observe_frames", 24)
    assert resume_refusal("old", values, run_settings(AgentConfig(preset="full", observe_frames=24).resolved())) is None


@pytest.mark.parametrize("caps", [{"max_tool_rounds": 4}, {"max_tool_rounds": 4, "a_cap_since_removed": 3}])
def test_only_the_caps_both_know_are_compared(caps):
    """A cap added after the run was recorded (or one since removed) says nothing about the run."""
    values = {**run_settings(AgentConfig(preset="full").resolved()), "caps": caps, "steps": [{"node": "assess"}]}
    assert resume_refusal("old", values, run_settings(AgentConfig(preset="full").resolved())) is None
    refused = resume_refusal("old", values, run_settings(AgentConfig(preset="full", max_tool_rounds=2).resolved()))
    assert refused is not None and "max_tool_rounds 4 (agent 2)" in str(refused)


def test_a_run_recorded_before_its_caps_is_judged_by_its_overrides_as_before():
    values = {**run_settings(AgentConfig(preset="full", max_tool_rounds=2).resolved()), "steps": [{"node": "x"}]}
    del values["caps"], values["draw"]
    assert resume_refusal("old", values, run_settings(AgentConfig(preset="full", max_tool_rounds=2).resolved())) is None
    refused = resume_refusal("old", values, run_settings(AgentConfig(preset="full").resolved()))
    assert refused is not None and "overrides {'max_tool_rounds': 2} (agent {})" in str(refused)


def test_caps_and_draw_given_as_numpy_integers_are_recorded_as_ints():
    """`AgentConfig` takes any whole number (a sweep over `np.arange`), and a run now records every cap and its draw:
    a numpy integer in the quality step's update made the checkpoint write raise (msgpack knows no numpy.int64), so
    such a run crashed where it ran before (only a numpy cap that differed from its default was recorded)."""
    import numpy as np

    from graph.trace_savers import traces_serde

    cfg = AgentConfig(preset="full", draw=np.int64(1), observe_frames=np.int64(32), max_tool_rounds=np.int32(2))
    settings = run_settings(cfg.resolved())
    assert type(cfg.draw) is int and {type(v) for v in settings["caps"].values()} == {int}
    serde = traces_serde()
    assert serde.loads_typed(serde.dumps_typed(settings)) == settings
