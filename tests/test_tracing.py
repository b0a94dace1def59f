"""Tracing: runs and steps read back from a SqliteSaver (a small stand-in graph with the agent's
`steps` / `result` state fields, so these tests do not depend on the full agent)."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from graph.schemas import RewardResult
from graph.trace_text import describe_update, step_row
from graph.tracing import RunNotFoundError, list_runs, open_saver, read_trace


class _State(TypedDict, total=False):
    video: str
    instruction: str
    steps: Annotated[list[dict[str, Any]], operator.add]
    result: RewardResult


def _graph(saver, *, finish: bool = True, result: RewardResult | None = None, decision: str = "R = 0.62"):
    def quality(s: _State) -> dict:
        return {"steps": [{"node": "quality", "duration_s": 0.01, "decision": "usable", "frames": list(range(20))}]}

    def inspect(s: _State) -> dict:
        return {"steps": [{"node": "tool_call", "duration_s": 0.5, "decision": "2 tool calls", "frames": [3, 4],
                           "crops": [{"frame": 3, "box": [0.1, 0.1, 0.5, 0.5], "fallback": False},
                                     {"frame": 4, "box": [0, 0, 1, 1], "fallback": True, "reason": "x0 >= x1"}],
                           "tool_summaries": ["view_frames [3, 4]", "view_crop f4 fallback"], "audit_round": 1}]}

    def gate(s: _State) -> dict:
        res = result or RewardResult(reward=0.62, status="scored", T=0.8, P=0.5, V=0.5, run_id="x", preset="full")
        return {"result": res, "steps": [{"node": "gate", "duration_s": 0.0, "decision": decision,
                                          "gate_inputs": {"eligible": True, "failure": False, "T": 0.8}}]}

    g = StateGraph(_State)
    g.add_node("quality", quality)
    g.add_node("inspect", inspect)
    g.add_edge(START, "quality")
    g.add_edge("quality", "inspect")
    if finish:
        g.add_node("gate", gate)
        g.add_edge("inspect", "gate")
        g.add_edge("gate", END)
    else:
        g.add_edge("inspect", END)
    return g.compile(checkpointer=saver)


def test_read_trace_returns_steps_in_order_and_result(tmp_path) -> None:
    saver = open_saver(tmp_path / "traces.sqlite")
    _graph(saver).invoke({"video": "a.mp4", "instruction": "pick"}, {"configurable": {"thread_id": "run-a"}})
    trace = read_trace(saver, "run-a")
    assert [s["node"] for s in trace.steps] == ["quality", "tool_call", "gate"]
    assert trace.status == "scored" and trace.reward == pytest.approx(0.62)
    assert trace.values["video"] == "a.mp4"
    row = step_row(1, trace.steps[1])
    assert row["frames"] == "3,4" and "fallback: x0 >= x1" in row["crops"] and row["audit"] == "2"  # stored round 1: the second
    assert "view_crop" in row["tools"]
    assert "failure=False" in step_row(2, trace.steps[2])["gate"]
    assert step_row(0, trace.steps[0])["frames"] == "0-19"  # every frame, runs as ranges


def test_list_runs_newest_first_with_incomplete_runs(tmp_path) -> None:
    path = tmp_path / "traces.sqlite"
    saver = open_saver(path)
    _graph(saver).invoke({"video": "a.mp4"}, {"configurable": {"thread_id": "run-a"}})
    _graph(saver, finish=False).invoke({"video": "b.mp4"}, {"configurable": {"thread_id": "run-b"}})
    runs = list_runs(open_saver(path))  # a fresh connection reads the same database
    assert [r.run_id for r in runs] == ["run-b", "run-a"]
    assert runs[0].status == "incomplete" and runs[0].reward is None
    assert runs[1].status == "scored"
    assert [r.run_id for r in list_runs(saver, limit=1)] == ["run-b"]


def _runs_of_each_status(saver) -> None:
    """run-1 .. run-4, oldest first: scored (full), zero (decomposed), ineligible (full), incomplete."""
    results = [RewardResult(reward=0.7, status="scored", run_id="run-1", preset="full"),
               RewardResult(reward=0.0, status="zero", reasons=["failure established: R2 not met"], run_id="run-2",
                            preset="decomposed"),
               RewardResult(reward=None, status="ineligible", reasons=["[assess] timeout: no reply in 120 s"],
                            run_id="run-3", preset="full")]
    for k, res in enumerate(results, 1):
        _graph(saver, result=res).invoke({"video": f"{k}.mp4", "preset": res.preset},
                                         {"configurable": {"thread_id": f"run-{k}"}})
    _graph(saver, finish=False).invoke({"video": "4.mp4"}, {"configurable": {"thread_id": "run-4"}})


def test_list_runs_filters_by_status_and_preset(tmp_path) -> None:
    saver = open_saver(tmp_path / "traces.sqlite")
    _runs_of_each_status(saver)
    assert [r.run_id for r in list_runs(saver)] == ["run-4", "run-3", "run-2", "run-1"]
    assert [r.run_id for r in list_runs(saver, status="ineligible")] == ["run-3"]
    assert list_runs(saver, status="ineligible")[0].reasons == ["[assess] timeout: no reply in 120 s"]
    assert [r.run_id for r in list_runs(saver, status="incomplete")] == ["run-4"]
    assert [r.run_id for r in list_runs(saver, preset="full")] == ["run-3", "run-1"]
    assert [r.run_id for r in list_runs(saver, preset="full", status="scored")] == ["run-1"]
    assert [r.run_id for r in list_runs(saver, preset="full", limit=1)] == ["run-3"]  # limit counts matches
    assert list_runs(saver, status="zero", preset="full") == []
    with pytest.raises(ValueError, match="status must be one of"):
        list_runs(saver, status="failed")


def test_missing_run_raises() -> None:
    with pytest.raises(RunNotFoundError, match="nope"):
        read_trace(open_saver(None), "nope")


def test_describe_stream_updates() -> None:
    saver = open_saver(None)
    lines = []
    for chunk in _graph(saver).stream({"video": "a.mp4"}, {"configurable": {"thread_id": "s"}},
                                      stream_mode="updates"):
        for node, update in chunk.items():
            lines.append(describe_update(node, update))
    assert lines[0].startswith("quality (0.01s): usable")
    assert "R = 0.62" in lines[-1] and "gate=" in lines[-1]
    assert describe_update("x", None) == "x: (no state update)"
    assert describe_update("x", {"zero": True}) == "x: updated zero"


def _interrupted_trace(g: StateGraph, path, run_id: str, durability: str):
    """The trace of a run of ``g`` (checkpoints in ``path``) cancelled 0.5 s after it started, as Ctrl-C or a
    kill stops `raa score` while a side node still waits."""
    import asyncio

    from graph.tracing import open_async_saver

    async def interrupted() -> None:
        async with open_async_saver(path) as saver:
            run = asyncio.create_task(g.compile(checkpointer=saver).ainvoke(
                {"video": "a.mp4"}, {"configurable": {"thread_id": run_id}}, durability=durability))
            await asyncio.sleep(0.5)
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run

    asyncio.run(interrupted())
    return read_trace(open_saver(path, read_only=True), run_id)


@pytest.mark.parametrize("durability", ["exit", "async"])
def test_an_interrupted_run_shows_the_steps_that_finished_beside_the_one_cut_off(tmp_path, durability) -> None:
    """observe and contract run side by side: a run stopped (Ctrl-C, a kill) while contract waited on the model
    kept observe's finished step only as a pending write of its checkpoint, and `raa trace` showed quality alone."""
    import asyncio

    def node(name: str, wait_s: float):
        async def run(s: _State) -> dict:
            await asyncio.sleep(wait_s)
            return {"steps": [{"node": name, "started": "2026-01-01T00:00:00", "decision": name}]}
        return run

    g = StateGraph(_State)
    for name, wait_s in (("quality", 0.0), ("observe", 0.0), ("contract", 30.0), ("assess", 0.0)):
        g.add_node(name, node(name, wait_s))
    g.add_edge(START, "quality")
    g.add_edge("quality", "observe")
    g.add_edge("quality", "contract")
    g.add_edge(["observe", "contract"], "assess")
    g.add_edge("assess", END)
    trace = _interrupted_trace(g, tmp_path / "traces.sqlite", "run-c", durability)
    assert trace.status == "incomplete"
    assert [s["node"] for s in trace.steps] == ["quality", "observe"]
    assert [s["node"] for s in trace.values["steps"]] == ["quality", "observe"]  # `raa trace --json`


class _FaultState(_State, total=False):
    faults: Annotated[list[dict[str, Any]], operator.add]
    notes: Annotated[list[str], operator.add]
    usage: Annotated[dict[str, int], lambda old, new: {k: (old or {}).get(k, 0) + v for k, v in new.items()}]
    observation: dict[str, Any]


def test_an_interrupted_run_shows_every_channel_the_finished_side_node_wrote(tmp_path) -> None:
    """observe faulted and finished beside contract, which was cut off: its step showed "fault (...)" in the
    table, but its fault (no `fault:` line), notes, usage and observation were left out of the trace."""
    import asyncio

    fault = {"stage": "observe", "kind": "invalid_reply", "message": "not JSON"}

    async def quality(s: _FaultState) -> dict:
        return {"steps": [{"node": "quality", "started": "2026-01-01T00:00:00", "decision": "usable"}],
                "notes": ["instruction truncated"], "usage": {"calls": 0, "images": 0}}

    async def observe(s: _FaultState) -> dict:
        return {"steps": [{"node": "observe", "started": "2026-01-01T00:00:01", "decision": "fault (invalid_reply)"}],
                "faults": [fault], "notes": ["observe note"], "usage": {"calls": 2, "images": 8},
                "observation": {"summary": "a red block"}}

    async def contract(s: _FaultState) -> dict:
        await asyncio.sleep(30)
        return {}

    g = StateGraph(_FaultState)
    for name, fn in (("quality", quality), ("observe", observe), ("contract", contract)):
        g.add_node(name, fn)
    g.add_edge(START, "quality")
    g.add_edge("quality", "observe")
    g.add_edge("quality", "contract")
    g.add_edge(["observe", "contract"], END)
    trace = _interrupted_trace(g, tmp_path / "traces.sqlite", "run-f", "async")
    assert [s["node"] for s in trace.steps] == ["quality", "observe"]
    assert trace.values["faults"] == [fault]
    assert trace.values["notes"] == ["instruction truncated", "observe note"]
    assert trace.values["usage"] == {"calls": 2, "images": 8}  # summed by AgentState's reducer
    assert trace.values["observation"] == {"summary": "a red block"}
    assert trace.status == "incomplete"
