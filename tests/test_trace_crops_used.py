"""A step's `crops` are the crops the model was shown (`graph.nodes.evidence.crop_records`): a view_crop that
showed no frame (a frame outside the clip, the frame budget spent, arguments the tool refused) was recorded as a
crop of frame None, and `raa trace` listed "fNone[0.10,...]" among the crops used."""

from __future__ import annotations

from langchain_core.messages import AIMessage

from graph.trace_text import step_row
from tests.graph_scripts import full_script, make_agent, moving_square, run

CALLS = [{"id": "a", "name": "view_crop", "args": {"frame": 16, "box": [0.1, 0.2, 0.6, 0.7]}, "type": "tool_call"},
         {"id": "b", "name": "view_crop", "args": {"frame": 12, "box": [0.6, 0.2, 0.1, 0.7]}, "type": "tool_call"},
         {"id": "c", "name": "view_crop", "args": {"frame": 99, "box": [0.1, 0.2, 0.6, 0.7]}, "type": "tool_call"},
         {"id": "d", "name": "view_crop", "args": {"frame": "late", "box": [0.1, 0.2, 0.6, 0.7]}, "type": "tool_call"}]


def test_tool_call_step_lists_only_the_crops_shown(tmp_path) -> None:
    agent, _ = make_agent("full", full_script(inspect=[AIMessage(content="", tool_calls=CALLS), "ok"]))
    out = run(agent, moving_square(tmp_path / "m.mp4"))
    step = next(s for s in out["steps"] if s["node"] == "tool_call")
    assert len(step["tool_summaries"]) == 4  # every call is summarised, shown or not
    assert [(c["frame"], c["fallback"]) for c in step["crops"]] == [(16, False), (12, True)], step["crops"]
    assert step["crops"][0]["box"] == [0.1, 0.2, 0.6, 0.7]
    crops = step_row(0, step)["crops"]
    assert "fNone" not in crops and crops.startswith("f16[0.10,0.20,0.60,0.70]; f12[] fallback: "), crops
