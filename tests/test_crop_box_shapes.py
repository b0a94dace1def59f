"""Crop boxes as models really write them (DESIGN.md §3: an invalid box falls back to the full frame and the
fallback is recorded; paper Sec. 3.2: invalid crop plans fall back to full-frame views)."""

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
