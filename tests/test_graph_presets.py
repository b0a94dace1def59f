"""Each of the 14 presets (paper Table 2) wires the nodes it should (asserted from the run's steps)."""

from __future__ import annotations

import pytest
from graph_scripts import canonical, garbage_file, make_agent, nodes, run, uniform_clip

from graph.builder import expected_nodes
from graph.config import PRESETS, AgentConfig

LOOP = ["inspect", "tool_call", "inspect"]  # the script asks for one tool round, then answers


def expected(observe: bool, surprise: bool, inspect: bool, reflect: bool, audit: bool, gate: bool) -> list[str]:
    seq = ["quality"] + sorted(["contract"] + (["observe"] if observe else []))
    seq += ["assess"] + (LOOP if inspect else []) + (["surprise"] if surprise else []) + (["reflect"] if reflect else [])
    return seq + (["audit"] if audit else []) + (["final_check"] if gate else []) + ["gate"]


EXPECTED = {
    "direct": ["quality", "direct", "gate"],
    "structured": expected(False, False, False, False, False, False),
    "decomposed": expected(False, False, False, False, False, False),
    "task_blind": expected(True, False, False, False, False, False),
    "visual_verify": expected(True, False, True, True, False, False),
    "motion": expected(True, False, True, True, False, False),
    "wmreward": expected(True, True, True, True, False, False),
    "audit_no_gate": expected(True, True, True, True, True, False),
    "full": expected(True, True, True, True, True, True),
    "no_task_blind": expected(False, True, True, True, True, True),
    "no_visual_verify": expected(True, True, False, True, True, True),
    "no_wmreward": expected(True, False, True, True, True, True),
    "no_audit": expected(True, True, True, True, False, True),
    "no_motion": expected(True, True, True, True, True, True),
}


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_wires_its_nodes(preset, clip):
    agent, model = make_agent(preset)
    out = run(agent, clip, run_id=f"p-{preset}")
    assert canonical(nodes(out)) == EXPECTED[preset]
    assert out["result"].status == "scored" and out["result"].preset == preset
    assert out["switches"] == AgentConfig(preset=preset).switches()
    graph_nodes = {n for n in agent.get_graph().nodes if not n.startswith("__")}
    assert graph_nodes == set(expected_nodes(AgentConfig(preset=preset).resolved()))
    # module-specific checks
    assert bool(model.calls_for("contract")) == (preset not in ("direct", "structured"))
    inspect_calls = model.calls_for("inspect")
    if inspect_calls:
        has_motion_tool = "track_motion" in inspect_calls[0].text()
        assert has_motion_tool == (preset not in ("visual_verify", "no_motion"))
    if preset == "no_visual_verify":  # motion evidence without the loop: one automatic grid track
        assert out["motion"] is not None and "Motion tracks" in out["motion"].summary
        # the points it tracked (the trace said 0, then always the first frame's 8x8 grid): the 64 of the first
        # query frame and the later ones that add coverage (the square moving into new cells)
        assert out["motion"].points >= 64 and f"Motion tracks: {out['motion'].points} points" in out["motion"].summary
    reflect_calls = model.calls_for("reflect")
    if reflect_calls:
        assert ("world-model surprise" in reflect_calls[0].text().lower()) == AgentConfig(preset=preset).resolved().wmreward
    if preset == "direct":
        assert out["result"].reward == pytest.approx(0.8) and out["result"].T is None
    gated = AgentConfig(preset=preset).resolved().failure_gate
    assert (out["result"].failure is not None) == gated


@pytest.fixture(scope="module")
def bad_clips(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad_clips")
    return uniform_clip(d / "flat.mp4"), garbage_file(d / "garbage.mp4")


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_runs_the_quality_check_first(preset, bad_clips):
    """DESIGN.md "Faults": a uniform clip gets 0 before any model call and an undecodable one is ineligible, in
    every preset; `direct` included (its one call comes after quality, graph.routes)."""
    uniform, garbage = bad_clips
    agent, model = make_agent(preset)
    out = run(agent, uniform, run_id=f"uniform-{preset}")
    assert out["result"].status == "zero" and out["result"].reward == 0.0 and "uniform" in out["result"].reasons[0]
    assert nodes(out) == ["quality", "gate"] and model.calls == []
    res = run(agent, garbage, run_id=f"garbage-{preset}")["result"]
    assert res.reward is None and res.reasons[0].startswith("quality: video:") and model.calls == []


def test_switch_overrides_are_recorded(clip):
    """A run built with an explicit override keeps its preset label and records the switches it ran with."""
    agent, _ = make_agent("full", audit=False)
    out = run(agent, clip, run_id="override")
    assert out["preset"] == "full" and out["switches"] == {**AgentConfig(preset="full").switches(), "audit": False}
    assert "audit" not in nodes(out)


def test_routes_open_no_callback_runs(clip):
    """Conditional edges run as `graph.routes.RouteStep`: a plain function there would open a traced run per
    routing decision (route_quality, route_inspect, ... and a RunnableCallable per lambda), ~3 ms of event-loop
    CPU per run; the traced runs are the graph's and its nodes' (and the model calls')."""
    from langchain_core.callbacks import BaseCallbackHandler

    class Names(BaseCallbackHandler):
        def __init__(self) -> None:
            self.names: list[str] = []

        def on_chain_start(self, serialized, inputs, *, run_id, name=None, **kwargs) -> None:  # noqa: ANN001
            self.names.append(kwargs.get("name") or name or "")

    agent, _ = make_agent("full")
    seen = Names()
    out = agent.invoke({"video": str(clip), "instruction": "push the red block to the right", "run_id": "cb"},
                       {"configurable": {"thread_id": "cb"}, "callbacks": [seen]})
    assert out["result"].status == "scored" and set(nodes(out)) <= set(seen.names)
    assert not [n for n in seen.names if n.startswith("route") or n in ("RunnableCallable", "RunnableLambda")]


@pytest.mark.parametrize("field,value", [("observe_frames", 10.5), ("max_tool_rounds", float("nan")),
                                         ("frame_budget", float("nan")), ("draw", 1.5), ("draw", True),
                                         ("max_repair_rounds", "2"), ("nearby_extra", 2.0),
                                         ("max_images_per_call", float("inf")), ("surprise_windows", 1.0),
                                         ("max_instruction_chars", 100.0), ("structured", "no"), ("audit", 1)])
def test_caps_must_be_whole_numbers_and_switches_booleans(field, value):
    """observe_frames=10.5 failed every run with an internal TypeError, max_tool_rounds=nan never ended the
    inspect loop (`rounds >= nan` is never true: paid calls without end) and structured="no" read as True."""
    with pytest.raises(ValueError, match=f"^{field} must be "):
        AgentConfig(**{field: value})
    assert AgentConfig(observe_frames=16, structured=False, draw=2).switches()["structured"] is False


def test_direct_is_one_call_with_frames_instruction_and_criteria(clip):
    """Preset direct (the paper's direct scoring): a single model call carrying the uniform frames, the
    instruction and the scoring criteria; the model's number is the reward."""
    agent, model = make_agent("direct")
    out = run(agent, clip, instruction="put the zebra teapot on the tray")
    assert [c.stage for c in model.calls] == ["direct"]
    call = model.calls[0]
    assert call.images() == 32 and "<instruction>\nput the zebra teapot on the tray\n</instruction>" in call.text()
    assert all(word in call.text() for word in ("task completion", "physical plausibility", "visual quality"))
    assert out["result"].reward == pytest.approx(0.8) and out["result"].failure is None


@pytest.mark.parametrize("preset,reward", [
    # T = (1 + 0) / 2 = 0.5 (R3 not essential), P = (3-1)/4 = 0.5, V = (2-1)/4 = 0.25:
    # R_diag = (0.35 + 0.10 + 0.025) * (0.5 + 0.25) = 0.35625
    ("audit_no_gate", 0.35625),
    ("full", 0.0), ("no_audit", 0.0)])  # failure established: the gate gives 0
def test_only_gated_presets_zero_an_established_failure(clip, preset, reward):
    from graph_scripts import assessment, full_script

    judged = assessment("met", "not_met", "met", phys=3, vis=2)
    script = full_script(assess=[judged], reflect=[judged], repair=[judged],
                         final_check=[{"failure_established": True, "essential_unverifiable": False,
                                       "rationale": "the block never reaches the right"}])
    agent, model = make_agent(preset, script)
    res = run(agent, clip, run_id=f"gate-{preset}")["result"]
    assert (res.T, res.P, res.V) == (0.5, 0.5, 0.25) and res.reward == pytest.approx(reward)
    assert len(model.calls_for("final_check")) == (preset != "audit_no_gate")
    assert res.status == ("scored" if preset == "audit_no_gate" else "zero")


def test_switches_without_the_structured_report_are_off_and_an_explicit_one_is_refused():
    """full with structured=False runs direct scoring, but its recorded switches said audit and the failure
    gate were on; failure_gate=True on direct was ignored without a word."""
    assert not any(AgentConfig(preset="full", structured=False).switches().values())
    assert not any(AgentConfig(preset="direct").switches().values())
    with pytest.raises(ValueError, match="failure_gate need the structured report"):
        AgentConfig(preset="direct", failure_gate=True)
    with pytest.raises(ValueError, match="audit, failure_gate need the structured report"):
        AgentConfig(preset="full", structured=False, audit=True, failure_gate=True)
    assert AgentConfig(preset="direct", audit=False).switches()["audit"] is False  # off stays allowed
