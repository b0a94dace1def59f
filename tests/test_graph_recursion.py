"""The agent's recursion limit follows its caps (graph.builder.recursion_limit, graph.routes.max_supersteps): its
loops end at max_tool_rounds and max_repair_rounds, not at LangGraph's default (25 supersteps in the releases
before it was raised, which pyproject.toml still admits)."""

from __future__ import annotations

import pytest
from graph_scripts import full_script, make_agent, run, tool_call

ALWAYS_ISSUES = {"missing_requirements": [], "invented_conditions": [], "contradictions": ["R3 contradicts R2"]}


def _longest(preset: str, **cfg):
    """A scripted agent whose inspector always calls a tool and whose audit is never clean."""
    script = full_script(inspect=[tool_call("view_frames", {"frames": [1]})], audit=[ALWAYS_ISSUES])
    return make_agent(preset, script, **cfg)


def _supersteps(out: dict) -> int:
    nodes = [s["node"] for s in out["steps"]]
    return len(nodes) - ("observe" in nodes)  # observe runs beside contract, in the same superstep


def test_a_run_at_every_cap_fits_the_agents_own_recursion_limit(clip):
    """Eight tool rounds and three repairs are 30 supersteps: over the old default of 25, so every such run was a
    GraphRecursionError (ineligible) wherever that default applied."""
    agent, _ = _longest("full", max_tool_rounds=8)
    out = run(agent, clip)
    assert out["result"].status == "scored" and out["repair_rounds"] == 3
    assert _supersteps(out) == 30
    assert (agent.config or {}).get("recursion_limit", 0) >= 30 + 1  # LangGraph counts the input as a step


@pytest.mark.parametrize(("preset", "cfg"), [("full", {"max_tool_rounds": 2}), ("no_task_blind", {}),
                                             ("no_visual_verify", {}), ("audit_no_gate", {"max_repair_rounds": 1}),
                                             ("decomposed", {}), ("direct", {})])
def test_max_supersteps_is_the_longest_run(clip, preset, cfg):
    from graph.routes import max_supersteps

    agent, _ = _longest(preset, **cfg)
    out = run(agent, clip, run_id=f"longest-{preset}")
    assert out["result"].status in ("scored", "zero")
    from graph import AgentConfig

    assert _supersteps(out) == max_supersteps(AgentConfig(preset=preset, **cfg).resolved())


def test_plan_mode_stays_under_the_bound(clip):
    from graph import AgentConfig
    from graph.routes import max_supersteps

    agent, _ = _longest("full", inspect_mode="plan")
    out = run(agent, clip)
    assert _supersteps(out) < max_supersteps(AgentConfig(preset="full", inspect_mode="plan").resolved())


def test_a_limit_given_at_invoke_still_wins(clip):
    from langgraph.errors import GraphRecursionError

    agent, _ = _longest("full")
    with pytest.raises(GraphRecursionError):
        agent.invoke({"video": str(clip), "instruction": "push the red block"},
                     {"configurable": {"thread_id": "tight"}, "recursion_limit": 5})
