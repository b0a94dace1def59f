"""Crop boxes as models really write them (DESIGN.md §3: an invalid box falls back to the full frame and the
fallback is recorded; paper Sec. 3.2: a crop plan that is not valid shows the whole frame)."""

from __future__ import annotations

import pytest
from graph_scripts import full_script, make_agent, run, tool_call


def test_a_box_written_as_numeric_strings_is_labelled_in_the_models_coordinates(clip):
    # pydantic reads "100" as 100.0, so the crop is valid; its image label, rebuilt from the raw arguments for the
    # next inspect round, formatted the strings with ":g" and the run ended ineligible on a ValueError
    box = ["100", "100", "600", "600"]
    script = full_script(inspect=[tool_call("view_crop", {"frame": 10, "box": box}), "done"])
    agent, model = make_agent("full", script, coordinates="per_mille")
    out = run(agent, clip)
    assert out["result"].status == "scored", out["result"].reasons
    assert out["exchanges"][0]["box"] == pytest.approx([0.1, 0.1, 0.6, 0.6])
    assert "crop [100, 100, 600, 600]" in model.calls_for("inspect")[1].text().split("frame 10 of 33", 1)[1]


MALFORMED = [[0.1, 0.2, 0.6], [0.1, 0.2, 0.6, 0.8, 0.9], [[0.1, 0.2], [0.6, 0.8]], [0.1, 0.2, None, 0.8], "0.1,0.2,0.6,0.8"]


@pytest.mark.parametrize("box", MALFORMED)
def test_a_malformed_crop_box_falls_back_to_the_full_frame(clip, box):
    # three numbers, five, corner pairs, a null: the tool's schema refused them as "invalid arguments" and no
    # frame was shown, although an invalid box is the fallback's case
    script = full_script(inspect=[tool_call("view_crop", {"frame": 10, "box": box}), "done"])
    out = run(make_agent("full", script)[0], clip)
    ex = out["exchanges"][0]
    assert ex["frames"] == [10] and ex["box"] is None
    assert ex["text"].startswith("frame 10 full frame") and "invalid crop box" in ex["text"]
    assert "using the full frame" in ex["text"]
    crops = [c for s in out["steps"] if s["node"] == "tool_call" for c in s["crops"]]
    assert crops and crops[0]["fallback"] is True and crops[0]["frame"] == 10
    assert out["result"].status == "scored"


@pytest.mark.parametrize("box", MALFORMED)
def test_a_plan_with_a_malformed_crop_box_views_the_full_frame(clip, box):
    # plan mode: the box failed the whole InspectionPlan, every re-ask failed the same way and the run was
    # ineligible; in the paper a crop plan that is not valid shows the whole frame
    plan = {"views": [{"frames": [10, 20], "box": box}], "tracks": [], "rationale": "check"}
    agent, model = make_agent("full", full_script(plan=[plan]), inspect_mode="plan")
    out = run(agent, clip)
    assert out["result"].status == "scored", out["result"].reasons
    assert len(model.calls_for("plan")) == 1
    assert [(e["frames"], e["box"]) for e in out["exchanges"]] == [([10], None), ([20], None)]
    assert all("invalid crop box" in e["text"] for e in out["exchanges"])


def test_the_box_schema_still_asks_for_four_numbers():
    # the fallback is for what a model writes anyway: the schema a server constrains decoding with is unchanged
    from graph.nodes.evidence import tool_specs
    from graph.schemas import InspectionPlan

    crop = next(t for t in tool_specs(False) if t["function"]["name"] == "view_crop")
    box = crop["function"]["parameters"]["properties"]["box"]
    assert (box["type"], box["items"]["type"], box["minItems"], box["maxItems"]) == ("array", "number", 4, 4)
    view = InspectionPlan.model_json_schema()["$defs"]["FrameView"]["properties"]["box"]
    arr = next(s for s in view["anyOf"] if s.get("type") == "array")
    assert (arr["items"]["type"], arr["minItems"], arr["maxItems"]) == ("number", 4, 4)
