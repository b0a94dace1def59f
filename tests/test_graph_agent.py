"""The reward agent end to end with a scripted backbone (no network)."""

from __future__ import annotations

import pytest
from graph_scripts import (
    CLEAN_AUDIT,
    FailingTracker,
    assessment,
    full_script,
    make_agent,
    nodes,
    run,
    tool_call,
)
from langgraph.checkpoint.memory import InMemorySaver

from graph.schemas import Requirement, TaskContract
from graph.state import ContractFrozenError, write_once

INSTRUCTION = "push the red block to the right"


def test_success_path(clip):
    agent, model = make_agent("full")
    out = run(agent, clip)
    res = out["result"]
    # T = 1 (R1, R2 met), P = 1 (level 5), V = 0.75 (level 4): (0.7 + 0.2 + 0.075) * 1 = 0.975
    assert res.status == "scored" and res.reward == pytest.approx(0.975)
    assert (res.T, res.P, res.V) == (1.0, 1.0, 0.75)
    assert res.failure is False and res.unverifiable is False and res.run_id == "run-test"
    assert res.usage["calls"] == len(model.calls) and res.usage["images"] > 0
    gate_step = out["steps"][-1]
    assert gate_step["node"] == "gate" and gate_step["gate_inputs"]["T"] == 1.0
    assert model.calls_for("final_check") == []  # no essential gap -> decided by code


def test_failure_established_gives_zero(clip):
    script = full_script(reflect=[assessment(s2="not_met", phys=4)],
                         final_check=[{"failure_established": True, "essential_unverifiable": False,
                                       "rationale": "the block never reaches the right", "evidence_frames": [32]}])
    agent, model = make_agent("full", script)
    res = run(agent, clip)["result"]
    assert res.reward == 0.0 and res.status == "zero" and res.failure is True
    assert res.T == pytest.approx(0.5)  # the diagnostic parts are still reported
    assert any("failure established" in r for r in res.reasons)
    assert model.calls_for("final_check") and model.calls_for("final_check")[0].images() > 0


def test_essential_unverifiable_gives_zero(clip):
    script = full_script(reflect=[assessment(s1="unverifiable")],
                         final_check=[{"failure_established": False, "essential_unverifiable": True,
                                       "rationale": "occluded"}])
    res = run(make_agent("full", script)[0], clip)["result"]
    assert res.reward == 0.0 and res.unverifiable is True and res.failure is False


def test_without_gate_failure_still_gets_diagnostic_reward(clip):
    script = full_script(reflect=[assessment(s2="not_met", phys=4)])
    agent, model = make_agent("audit_no_gate", script)
    res = run(agent, clip)["result"]
    # T = 0.5, P = 0.75, V = 0.75: (0.35 + 0.15 + 0.075) * 0.875 = 0.503125
    assert res.reward == pytest.approx(0.503125) and res.failure is None
    assert model.calls_for("final_check") == []


def test_audit_missing_requirement_then_repair_then_clean(clip):
    partial = assessment()
    partial["judgments"] = partial["judgments"][:2]  # R3 missing
    missing = {"missing_requirements": ["R3"], "invented_conditions": [], "contradictions": []}
    script = full_script(reflect=[partial], audit=[missing, CLEAN_AUDIT], repair=[assessment()])
    agent, model = make_agent("full", script)
    out = run(agent, clip)
    assert [n for n in nodes(out) if n in ("audit", "repair")] == ["audit", "repair", "audit"]
    assert out["repair_rounds"] == 1 and out["audits"][-1].clean
    assert out["assessment"].judgment("R3") is not None
    repair_calls = model.calls_for("repair")
    assert len(repair_calls) == 1 and repair_calls[0].images() > 0
    assert out["result"].status == "scored"


def test_audit_never_clean_stops_after_three_rounds(clip):
    dirty = {"missing_requirements": [], "invented_conditions": ["demands speed"], "contradictions": []}
    agent, model = make_agent("full", full_script(audit=[dirty]))
    out = run(agent, clip)
    assert [n for n in nodes(out) if n in ("audit", "repair")] == ["audit", "repair"] * 3 + ["audit"]
    assert out["repair_rounds"] == 3 and len(model.calls_for("repair")) == 3
    assert all(c.images() > 0 for c in model.calls_for("repair"))  # repair always re-looks at frames
    assert out["result"].status == "scored"
    # the issues the last audit still found are in the result, not dropped once the rounds ran out
    assert out["result"].notes == ["audit: issues remain after 3 repair round(s) (missing [], invented 1, "
                                   "contradictions 0); the assessment stands as is"]


def test_code_adds_missing_requirement_even_if_audit_model_says_clean(clip):
    partial = assessment()
    partial["judgments"] = partial["judgments"][:2]
    agent, model = make_agent("full", full_script(assess=[partial], reflect=[partial], audit=[CLEAN_AUDIT]))
    out = run(agent, clip)  # never judged (reflect keeps what assess had: nothing for R3)
    assert out["audits"][0].missing_requirements == ["R3"]
    assert len(model.calls_for("repair")) >= 1


def test_text_only_repair_never_flips_a_visual_judgment(clip):
    dirty = {"missing_requirements": [], "invented_conditions": [], "contradictions": ["R2 contradicts frames"]}
    flipped = assessment(s2="not_met", frames=(999,))  # cites no frame that was shown
    agent, model = make_agent("full", full_script(audit=[dirty, CLEAN_AUDIT], repair=[flipped]))
    out = run(agent, clip)
    assert out["assessment"].judgment("R2").status == "met"
    assert any("kept met" in n for n in out["notes"])


def test_revisions_that_leave_judgments_out_keep_them(clip):
    """Reflect and repair ask for the full assessment; a reply with only the requirements under discussion must
    not turn the others unverifiable (T fell from 1 to 0.5 and the gate saw an essential gap)."""
    only_r2 = {**assessment(), "judgments": [j for j in assessment()["judgments"] if j["requirement_id"] == "R2"]}
    dirty = {"missing_requirements": [], "invented_conditions": [], "contradictions": ["R2 contradicts frames"]}
    agent, model = make_agent("full", full_script(reflect=[only_r2], audit=[dirty, CLEAN_AUDIT], repair=[only_r2]))
    out = run(agent, clip)
    assert [j.requirement_id for j in out["assessment"].judgments] == ["R1", "R2", "R3"]
    assert out["result"].T == 1.0 and model.calls_for("final_check") == []
    assert "reflect: R1 kept met (the revised assessment left it out)" in out["notes"]
    assert "repair: R3 kept partial (the revised assessment left it out)" in out["notes"]


def test_repair_backed_by_shown_frames_may_flip(clip):
    dirty = {"missing_requirements": [], "invented_conditions": [], "contradictions": ["R2 contradicts frames"]}
    flipped = assessment(s2="not_met", frames=(16, 32))
    agent, _ = make_agent("full", full_script(audit=[dirty, CLEAN_AUDIT], repair=[flipped],
                                              final_check=[{"failure_established": True,
                                                            "essential_unverifiable": False}]))
    out = run(agent, clip)
    assert out["assessment"].judgment("R2").status == "not_met"
    assert out["result"].reward == 0.0


def test_tool_fault_gives_ineligible(clip):
    script = full_script(inspect=[tool_call("track_motion", {"start_frame": 0, "end_frame": 32})])
    agent, _ = make_agent("full", script, tracker=FailingTracker())
    out = run(agent, clip)
    res = out["result"]
    assert res.reward is None and res.status == "ineligible"
    assert any("tracker crashed" in r for r in res.reasons)
    assert nodes(out)[-1] == "gate" and "reflect" not in nodes(out)


def test_inspect_loop_stops_at_cap(clip):
    script = full_script(inspect=[tool_call("view_frames", {"frames": [1, 2]})])  # never stops asking
    agent, model = make_agent("full", script, max_tool_rounds=3)
    out = run(agent, clip)
    assert nodes(out).count("tool_call") == 3 and len(model.calls_for("inspect")) == 3
    assert out["result"].status == "scored"


def test_frame_budget_trims_views(clip):
    script = full_script(inspect=[tool_call("view_frames", {"frames": list(range(16))})])
    agent, _ = make_agent("full", script, max_tool_rounds=4, frame_budget=20)
    out = run(agent, clip)
    assert sum(len(e["frames"]) for e in out["exchanges"]) == 20
    assert any("frame budget" in e["text"] for e in out["exchanges"])


def test_invalid_crop_falls_back_to_full_frame(clip):
    script = full_script(inspect=[tool_call("view_crop", {"frame": 5, "box": [0.9, 0.9, 0.1, 0.1]}), "done"])
    agent, model = make_agent("full", script)
    out = run(agent, clip)
    ex = out["exchanges"][0]
    assert ex["box"] is None and "full frame" in ex["text"]
    crop_step = next(s for s in out["steps"] if s["node"] == "tool_call")
    assert crop_step["crops"][0]["fallback"] is True
    second = model.calls_for("inspect")[1]
    assert second.images() == 1 and "full frame" in second.text()


@pytest.mark.parametrize(("box", "used"), [([0.1, 0.3, 0.120001, 0.7], None), ([0.3, 0.10003, 0.7, 0.12004], None),
                                           ([0.100004, 0.3, 0.600001, 0.7], [0.1, 0.3, 0.6, 0.7])])
def test_crop_boxes_are_checked_as_the_frame_store_rounds_them(clip, box, used):
    """The frame store crops the box rounded to 4 decimals and checks it again: a side just over 0.02 passed
    view_crop's check, then raised ValueError when the images were built (the run ineligible)."""
    agent, _ = make_agent("full", full_script(inspect=[tool_call("view_crop", {"frame": 16, "box": box}), "done"]))
    out = run(agent, clip)
    ex = out["exchanges"][0]
    assert out["result"].status == "scored", out["result"].reasons
    assert ex["box"] == used and ("box too small" in ex["text"]) == (used is None)


def test_valid_crop_and_motion_tool(clip):
    script = full_script(inspect=[
        AIMessage_two_calls(),
        "done"])
    agent, model = make_agent("full", script)
    out = run(agent, clip)
    names = [e["name"] for e in out["exchanges"]]
    assert names == ["view_crop", "track_motion"]
    assert out["exchanges"][0]["box"] == pytest.approx([0.1, 0.2, 0.6, 0.8])
    assert "Motion tracks" in out["exchanges"][1]["text"] and out["exchanges"][1]["overlay"]
    assert model.calls_for("reflect")[0].images() >= 2


def AIMessage_two_calls():
    from langchain_core.messages import AIMessage

    return AIMessage(content="", tool_calls=[
        {"id": "a", "name": "view_crop", "args": {"frame": 10, "box": [0.1, 0.2, 0.6, 0.8]}, "type": "tool_call"},
        {"id": "b", "name": "track_motion", "args": {"start_frame": 0, "end_frame": 32,
                                                     "points": [[0.2, 0.5]]}, "type": "tool_call"}])


def test_plan_mode_executes_one_plan(clip):
    script = full_script(plan=[{"views": [{"frames": [3, 4]}, {"frames": [30], "box": [0.0, 0.0, 0.5, 0.5]}],
                                "tracks": [{"start_frame": 0, "end_frame": 20, "points": []}]}])
    agent, model = make_agent("full", script, inspect_mode="plan")
    out = run(agent, clip)
    assert "tool_call" not in nodes(out) and model.calls_for("inspect") == []
    assert [e["name"] for e in out["exchanges"]] == ["view_frames", "view_crop", "track_motion"]
    assert out["result"].status == "scored"


def test_observe_never_sees_the_instruction(clip):
    secret = "stack the zebra-striped teapot on the purple tray"
    agent, model = make_agent("full")
    run(agent, clip, instruction=secret)
    observe_calls = model.calls_for("observe")
    assert len(observe_calls) == 1 and observe_calls[0].images() == 32
    assert secret not in observe_calls[0].text() and "teapot" not in observe_calls[0].text()
    assert any(secret in c.text() for c in model.calls_for("contract"))


def test_contract_written_twice_raises(clip):
    c = TaskContract(requirements=[Requirement(id="R1", kind="outcome", text="x")])
    assert write_once(None, c) is c
    with pytest.raises(ContractFrozenError):
        write_once(c, c)
    agent, _ = make_agent("full")
    config = {"configurable": {"thread_id": "frozen"}}
    agent.invoke({"video": str(clip), "instruction": INSTRUCTION}, config)
    with pytest.raises(ContractFrozenError):
        agent.update_state(config, {"contract": c})


def test_checkpoints_hold_no_pixels(clip):
    agent, _ = make_agent("full")
    run(agent, clip, run_id="small")
    history = list(agent.get_state_history({"configurable": {"thread_id": "small"}}))
    assert len(history) > 5
    blob = repr(history[0].values)
    assert "data:image" not in blob and len(blob) < 60_000


def test_ainvoke_matches_invoke(clip):
    import asyncio

    agent, _ = make_agent("full")
    out = asyncio.run(agent.ainvoke({"video": str(clip), "instruction": INSTRUCTION},
                                    {"configurable": {"thread_id": "a1"}}))
    assert out["result"].reward == pytest.approx(0.975) and out["result"].run_id == "a1"


def test_default_sqlite_checkpointer_and_tracing(clip, tmp_path):
    from graph import AgentConfig, AgentTools, build_reward_agent, score_video
    from graph.settings import BackboneSettings
    from graph.testing import ScriptedChatModel

    settings = BackboneSettings(traces_path=str(tmp_path / "traces.sqlite"), cache_path=None)
    model = ScriptedChatModel(full_script())
    res = score_video(clip, INSTRUCTION, AgentConfig(preset="decomposed"), model=model, settings=settings,
                      run_id="sq-1")
    assert res.status == "scored" and (tmp_path / "traces.sqlite").exists()
    agent = build_reward_agent(AgentConfig(preset="decomposed"), model=model, settings=settings,
                               tools=AgentTools())
    state = agent.get_state({"configurable": {"thread_id": "sq-1"}})
    assert [s["node"] for s in state.values["steps"]] == ["quality", "contract", "assess", "gate"]


@pytest.mark.parametrize("durability", ["exit", "async"])
def test_trace_durability_decides_per_step_checkpoints_not_the_trace(clip, tmp_path, durability):
    """`exit` (the default) writes one checkpoint when the run ends, holding every step; `async` also
    writes one per step. Both leave the same step trace and result."""
    from graph import AgentConfig, AgentTools, build_reward_agent, score_video
    from graph.settings import BackboneSettings
    from graph.testing import ScriptedChatModel

    settings = BackboneSettings(traces_path=str(tmp_path / "traces.sqlite"), cache_path=None)
    model = ScriptedChatModel(full_script())
    res = score_video(clip, INSTRUCTION, AgentConfig(preset="decomposed"), model=model, settings=settings,
                      run_id="d-1", durability=durability)
    assert res.status == "scored"
    agent = build_reward_agent(AgentConfig(preset="decomposed"), model=model, settings=settings,
                               tools=AgentTools())
    config = {"configurable": {"thread_id": "d-1"}}
    assert [s["node"] for s in agent.get_state(config).values["steps"]] == ["quality", "contract", "assess", "gate"]
    assert agent.get_state(config).values["result"] == res
    history = list(agent.get_state_history(config))
    assert (len(history) == 1) if durability == "exit" else (len(history) >= 5)


def test_building_needs_no_connection_or_weights():
    from graph import AgentConfig, build_reward_agent
    from graph.settings import BackboneSettings

    settings = BackboneSettings(base_url="http://127.0.0.1:9/v1", model="m", api_key="k", cache_path=None,
                                traces_path=":memory:")
    agent = build_reward_agent(AgentConfig(preset="full"), settings=settings, checkpointer=InMemorySaver())
    assert "inspect" in agent.get_graph().nodes


def test_ascore_videos_with_default_sqlite_checkpointer(clip, tmp_path):
    import asyncio

    from graph import AgentConfig, AgentTools, ascore_videos
    from graph.settings import BackboneSettings
    from graph.testing import ScriptedChatModel
    from graph.tracing import open_saver

    settings = BackboneSettings(traces_path=str(tmp_path / "t.sqlite"), cache_path=None)
    results = asyncio.run(ascore_videos([{"video": str(clip), "instruction": INSTRUCTION, "run_id": f"b{i}"}
                                         for i in range(3)], AgentConfig(preset="task_blind"),
                                        model=ScriptedChatModel(full_script()), settings=settings,
                                        tools=AgentTools()))
    assert [r.status for r in results] == ["scored"] * 3
    saver = open_saver(tmp_path / "t.sqlite")
    tup = saver.get_tuple({"configurable": {"thread_id": "b1"}})
    assert tup is not None and tup.checkpoint["channel_values"]["result"].run_id == "b1"


def test_unconfigured_default_model_raises_a_clear_error(tmp_path, monkeypatch):
    from graph import build_reward_agent
    from graph.settings import SettingsError

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SettingsError, match="RAA_BASE_URL"):
        build_reward_agent(checkpointer=InMemorySaver())
    assert list(tmp_path.iterdir()) == []  # the failed build left no stage-cache file behind


def test_context_passed_per_invocation_is_used(clip):
    from graph import AgentConfig
    from graph.backbone import Backbone
    from graph.context import RunContext
    from graph.testing import ScriptedChatModel

    agent, default_model = make_agent("decomposed")
    other_model = ScriptedChatModel(full_script())

    ctx = RunContext(backbone=Backbone(other_model), config=AgentConfig(preset="decomposed").resolved())
    out = agent.invoke({"video": str(clip), "instruction": INSTRUCTION}, {"configurable": {"thread_id": "ctx"}},
                       context=ctx)
    assert out["result"].status == "scored"
    assert default_model.calls == [] and len(other_model.calls) == 2


def test_sync_entry_points_work_inside_a_running_event_loop(clip, tmp_path):
    """A Jupyter cell runs inside an event loop, where asyncio.run refuses: score_video and the compiled
    graph's invoke must still score (they run on a private loop in a helper thread)."""
    import asyncio

    from graph import AgentConfig, AgentTools, build_reward_agent, score_video
    from graph.settings import BackboneSettings
    from graph.testing import ScriptedChatModel

    settings = BackboneSettings(traces_path=str(tmp_path / "traces.sqlite"), cache_path=None)

    async def cell():
        asyncio.get_running_loop()  # the situation of a notebook cell
        res = score_video(clip, INSTRUCTION, AgentConfig(preset="decomposed"), model=ScriptedChatModel(full_script()),
                          settings=settings, run_id="nb-1")
        agent = build_reward_agent(AgentConfig(preset="decomposed"), model=ScriptedChatModel(full_script()),
                                   tools=AgentTools(), settings=settings)
        out = agent.invoke({"video": str(clip), "instruction": INSTRUCTION}, {"configurable": {"thread_id": "nb-2"}})
        return res, out["result"]

    res, invoked = asyncio.run(cell())
    assert res.status == "scored" and res.reward == pytest.approx(0.975) and res.run_id == "nb-1"
    assert invoked.status == "scored" and invoked.reward == res.reward


def test_step_decisions_count_in_words():
    from graph.nodes.common import count

    assert [count(n, "tool call") for n in (0, 1, 2)] == ["0 tool calls", "1 tool call", "2 tool calls"]


def test_agents_built_with_the_same_settings_share_their_tools_and_trace_database(clip, tmp_path, monkeypatch):
    """score_video builds an agent per call: each loaded its own tool models (V-JEPA 2 again for every clip)
    and opened SQLite connections whose file descriptors SQLite keeps until all of that file's close."""
    import os

    from graph import AgentConfig, build_reward_agent, score_video
    from graph.testing import ScriptedChatModel

    monkeypatch.setenv("RAA_TRACES_PATH", str(tmp_path / "traces.sqlite"))
    a, b = (build_reward_agent(AgentConfig(preset="decomposed"), model=ScriptedChatModel(full_script()))
            for _ in range(2))
    assert a.checkpointer is b.checkpointer
    for _ in range(2):
        score_video(clip, INSTRUCTION, AgentConfig(preset="decomposed"), model=ScriptedChatModel(full_script()))
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        score_video(clip, INSTRUCTION, AgentConfig(preset="decomposed"), model=ScriptedChatModel(full_script()))
    assert len(os.listdir("/proc/self/fd")) <= before
