"""The inspector is told the limits it works under: the per-round cap on track_motion runs
(`graph.schemas.TRACKS_PER_ROUND`) appears in the inspect prompt (tools mode) and the plan prompt (plan mode),
rendered from the value the loop enforces, as the frame budget and round limit are; so is the plan's view cap
(`graph.schemas.PLAN_VIEWS`)."""

from __future__ import annotations

import pytest
from graph_scripts import full_script, make_agent, run


@pytest.mark.parametrize("cap", [2, 3])
def test_inspect_prompt_states_the_track_cap(monkeypatch, clip, cap) -> None:
    import graph.nodes.inspect as inspect_node

    monkeypatch.setattr(inspect_node, "TRACKS_PER_ROUND", cap)  # the value the loop enforces, not a literal
    agent, model = make_agent("full", motion_prefetch="off")
    run(agent, clip)
    text = model.calls_for("inspect")[0].text()
    assert f"at most {cap} track_motion calls per round" in text, text


def test_inspect_prompt_has_no_track_cap_without_motion(clip) -> None:
    agent, model = make_agent("no_motion", motion_prefetch="off")
    run(agent, clip)
    assert "track_motion" not in model.calls_for("inspect")[0].text()


def test_plan_prompt_states_the_track_cap(monkeypatch, clip) -> None:
    import graph.nodes.inspect as inspect_node

    monkeypatch.setattr(inspect_node, "TRACKS_PER_ROUND", 3)
    agent, model = make_agent("full", full_script(), inspect_mode="plan", motion_prefetch="off")
    run(agent, clip)
    text = model.calls_for("plan")[0].text()
    assert "up to 3 motion-track requests" in text, text


@pytest.mark.parametrize("views", [3, 5])
def test_plan_prompt_states_the_view_cap(monkeypatch, clip, views) -> None:
    """plan.md said "up to 8 views" as a literal: a changed `PLAN_VIEWS` (the cap `plan_calls` enforces,
    dropping later views) left the model told a number that no longer held."""
    import graph.nodes.inspect as inspect_node

    monkeypatch.setattr(inspect_node, "PLAN_VIEWS", views)
    agent, model = make_agent("full", full_script(), inspect_mode="plan", motion_prefetch="off")
    run(agent, clip)
    text = model.calls_for("plan")[0].text()
    assert f"up to {views} views" in text and "up to 8 views" not in text, text
