"""A tool round that faults keeps, in its step, the calls that ran before the fault: the tool_call step recorded
its frames, crops and tool summaries only once every call of the round had run, so a round whose track_motion
failed after a view_frames and a view_crop was listed by `raa trace` with no frames, crops or tools at all."""

from __future__ import annotations

from langchain_core.messages import AIMessage

from tests.graph_scripts import FailingTracker, full_script, make_agent, moving_square, run

CALLS = [{"id": "a", "name": "view_frames", "args": {"frames": [10, 20]}, "type": "tool_call"},
         {"id": "b", "name": "view_crop", "args": {"frame": 16, "box": [0.1, 0.2, 0.6, 0.7]}, "type": "tool_call"},
         {"id": "c", "name": "track_motion", "args": {"start_frame": 0, "end_frame": 32, "points": []},
          "type": "tool_call"}]


def test_a_faulted_tool_round_keeps_the_calls_that_ran(tmp_path) -> None:
    script = full_script(inspect=[AIMessage(content="", tool_calls=CALLS), "confirmed"])
    agent, _ = make_agent("full", script, tracker=FailingTracker())
    out = run(agent, moving_square(tmp_path / "m.mp4"))
    assert out["result"].status == "ineligible", out["result"]
    step = next(s for s in out["steps"] if s["node"] == "tool_call")
    assert step["decision"].startswith("fault (tool)"), step
    assert {10, 16, 20} <= set(step["frames"]), step
    assert [c["frame"] for c in step["crops"]] == [16], step
    assert [t.split("(")[0] for t in step["tool_summaries"]] == ["view_frames", "view_crop"], step
