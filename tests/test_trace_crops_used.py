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
    assert "fNone" not in crops and crops.startswith("f16[0.10,0.20,0.60,0.70]; f12[full frame, asked 0.60,0.20,0.10,0.70] fallback: "), crops


def test_reflect_step_lists_the_inspection_crops_it_sent(tmp_path) -> None:
    """reflect sends the inspection's images again, crops included; its step listed their frames and no crop, so
    `raa trace` hid that the revision saw a crop and not the full frame."""
    agent, _ = make_agent("full", full_script(inspect=[AIMessage(content="", tool_calls=CALLS[:2]), "ok"]))
    out = run(agent, moving_square(tmp_path / "m.mp4"))
    step = next(s for s in out["steps"] if s["node"] == "reflect")
    assert {16, 12} <= set(step["frames"]), step["frames"]
    assert [(c["frame"], c["box"], c["fallback"]) for c in step["crops"]] == \
        [(16, [0.1, 0.2, 0.6, 0.7], False), (12, None, True)], step["crops"]


def test_reflect_step_lists_no_crop_whose_image_the_cap_left_out(tmp_path) -> None:
    """Only the crops whose images were sent: the cap on images per request keeps the most recent ones."""
    crop = {**CALLS[0], "args": {"frame": 3, "box": [0.1, 0.2, 0.6, 0.7]}}
    views = [{"id": f"v{k}", "name": "view_frames", "args": {"frames": [k]}, "type": "tool_call"} for k in (1, 2)]
    agent, _ = make_agent("full", full_script(inspect=[AIMessage(content="", tool_calls=[crop, *views]), "ok"]),
                          max_images_per_call=6, observe_frames=4, frame_budget=6,
                          surprise_windows=1)
    out = run(agent, moving_square(tmp_path / "m.mp4"))
    step = next(s for s in out["steps"] if s["node"] == "reflect")
    assert 3 not in step["frames"] and {1, 2} <= set(step["frames"]) and step["crops"] == [], step


def test_a_crop_that_fell_back_shows_the_box_asked_for_and_the_full_frame(tmp_path) -> None:
    """A view_crop whose box the tool could not use showed the full frame; `raa trace` listed it as "f12[]", hiding
    both the box the model asked for and that the frame was shown whole."""
    agent, _ = make_agent("full", full_script(inspect=[AIMessage(content="", tool_calls=CALLS[:2]), "ok"]))
    out = run(agent, moving_square(tmp_path / "m.mp4"))
    step = next(s for s in out["steps"] if s["node"] == "tool_call")
    assert step["crops"][1]["requested"] == [0.6, 0.2, 0.1, 0.7], step["crops"]
    crops = step_row(0, step)["crops"]
    assert "f12[]" not in crops and "f12[full frame, asked 0.60,0.20,0.10,0.70] fallback: " in crops, crops


def test_a_fallback_crop_of_an_older_trace_or_with_a_malformed_box_still_reads() -> None:
    step = {"node": "tool_call", "crops": [{"frame": 3, "box": None, "fallback": True, "reason": "bad box"},
                                           {"frame": 4, "box": None, "fallback": True, "reason": "bad box",
                                            "requested": ["a", None]}]}
    assert step_row(0, step)["crops"] == "f3[full frame] fallback: bad box; f4[full frame, asked a,None] fallback: " \
        "bad box"
