"""A track point written with a boolean coordinate (`[true, 0.5]`) is no position: pydantic's lax float read `true`
as 1.0, so the request was tracked at a point nobody named (the frame's right edge in unit coordinates) and its
motion summary informed the judgments. Frame indices (`tools.sampling.frame_index`) and crop boxes
(`graph.inspection_schemas.crop_box`) already refuse booleans; points now do too, in both inspect modes: a plan's
track is skipped with the reason, a tools-mode call is answered "invalid arguments". Numeric strings stay lax, as
for crop boxes."""

from __future__ import annotations

import pytest
from graph_scripts import full_script, make_agent, run, tool_call
from pydantic import ValidationError

from graph.nodes.evidence import track_motion
from graph.schemas import TrackRequest
from tests.test_plan_entries import CountingTracker


@pytest.mark.parametrize("model", [TrackRequest, track_motion])
@pytest.mark.parametrize("point", [[True, 0.5], [0.5, False]])
def test_a_boolean_coordinate_is_refused(model, point):
    with pytest.raises(ValidationError, match="boolean"):
        model.model_validate({"start_frame": 0, "end_frame": 9, "points": [[0.2, 0.2], point]})


def test_numbers_and_numeric_strings_still_read():
    req = TrackRequest.model_validate({"start_frame": 0, "end_frame": 9, "points": [[0.25, "0.5"], [1, 0]]})
    assert req.points == [[0.25, 0.5], [1.0, 0.0]]


def test_a_plan_track_with_a_boolean_point_is_not_run(clip):
    bad = {"start_frame": 0, "end_frame": 20, "points": [[True, 0.5]]}
    tracker = CountingTracker()
    agent, _ = make_agent("full", full_script(plan=[{"views": [], "tracks": [bad], "rationale": "x"}]),
                          tracker=tracker, inspect_mode="plan", motion_prefetch="off")
    out = run(agent, clip, run_id="bool-plan")
    ex = out["exchanges"]
    assert ex[0]["text"].startswith("plan track 1 not run: invalid arguments for track_motion"), ex[0]["text"]
    assert not ex[0].get("overlay") and tracker.calls == 0


def test_a_track_motion_call_with_a_boolean_point_is_answered_invalid(clip):
    call = tool_call("track_motion", {"start_frame": 0, "end_frame": 20, "points": [[True, 0.5]]})
    tracker = CountingTracker()
    agent, _ = make_agent("full", full_script(inspect=[call, "done"]), tracker=tracker, motion_prefetch="off")
    out = run(agent, clip, run_id="bool-tools")
    ex = [e for e in out["exchanges"] if e["name"] == "track_motion"]
    assert len(ex) == 1 and ex[0]["text"].startswith("invalid arguments for track_motion"), ex[0]["text"]
    assert tracker.calls == 0
