"""One bad entry of an InspectionPlan skips that entry, not the plan (DESIGN.md §3: invalid crops fall back to full
frames and say so; the same for a malformed track request or an empty view), and track_motion runs at most
`TRACKS_PER_ROUND` times per inspect round in both modes."""

from __future__ import annotations

import hashlib
import json

import pytest
from graph_scripts import full_script, make_agent, run
from langchain_core.messages import AIMessage

from tools.motion import LKTracker


class CountingTracker(LKTracker):
    """LK, counting the track jobs it ran (a grid track's follow-up call counts too; tests use point tracks)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def track(self, frames, *, grid_size=None, queries=None):  # noqa: ANN001, ANN201 (protocol)
        self.calls += 1
        return super().track(frames, grid_size=grid_size, queries=queries)


GOOD_TRACK = {"start_frame": 0, "end_frame": 32, "points": [[0.3, 0.5]]}
BAD_TRACKS = [
    {"start_frame": "ten", "end_frame": 20},                      # not a number
    {"start_frame": 0, "end_frame": 20, "points": [0.5, 0.5]},    # points not [x, y] pairs
    {"start_frame": -3, "end_frame": 20},                         # a frame before the clip
    {"end_frame": 20},                                            # no start_frame
    "track frames 0-20",                                          # not an object
]


def plan_run(clip, plan: dict) -> tuple[dict, object, CountingTracker]:
    tracker = CountingTracker()
    agent, model = make_agent("full", full_script(plan=[plan]), tracker=tracker, inspect_mode="plan",
                              motion_prefetch="off")
    return run(agent, clip), model, tracker


def plan_summaries(out: dict) -> list[str]:
    return [t for s in out["steps"] if s["node"] == "inspect" for t in s["tool_summaries"]]


@pytest.mark.parametrize("bad", BAD_TRACKS)
def test_a_malformed_track_request_is_skipped_and_the_rest_of_the_plan_runs(clip, bad):
    # it failed the whole InspectionPlan: every re-ask failed the same way and the run was ineligible
    plan = {"views": [{"frames": [10, 20]}], "tracks": [bad, GOOD_TRACK], "rationale": "check"}
    out, model, tracker = plan_run(clip, plan)
    assert out["result"].status == "scored", out["result"].reasons
    assert len(model.calls_for("plan")) == 1
    ex = out["exchanges"]
    assert [e["frames"] for e in ex if e["name"] == "view_frames" and e["frames"]] == [[10, 20]]
    assert sum(1 for e in ex if e.get("overlay")) == 1 and tracker.calls == 1
    skipped = [e for e in ex if "not run" in e["text"]]
    assert len(skipped) == 1 and skipped[0]["frames"] == [] and skipped[0]["name"] == "track_motion"
    assert skipped[0]["text"].startswith("plan track 1 not run: invalid arguments for track_motion")
    assert any("plan track 1 not run" in t for t in plan_summaries(out))  # the trace shows it


@pytest.mark.parametrize("bad", [{"frames": []}, {"box": [0.1, 0.1, 0.5, 0.5]}, {"frames": ["a"]}, 7])
def test_a_view_without_frames_is_skipped_and_the_rest_of_the_plan_runs(clip, bad):
    plan = {"views": [bad, {"frames": [10]}], "tracks": [], "rationale": "check"}
    out, model, _ = plan_run(clip, plan)
    assert out["result"].status == "scored", out["result"].reasons
    assert len(model.calls_for("plan")) == 1
    ex = out["exchanges"]
    assert [e["frames"] for e in ex] == [[], [10]]
    assert ex[0]["text"].startswith("plan view 1 not run: invalid view")
    assert any("plan view 1 not run" in t for t in plan_summaries(out))


def test_tracks_and_views_past_the_plan_caps_are_skipped_with_a_note(clip):
    # the schema's maxItems (2 tracks, 8 views) failed the whole plan for one entry too many
    tracks = [dict(GOOD_TRACK, points=[[0.1 * k, 0.5]]) for k in (1, 2, 3)]
    views = [{"frames": [k]} for k in range(9)]
    out, model, tracker = plan_run(clip, {"views": views, "tracks": tracks, "rationale": "check"})
    assert out["result"].status == "scored", out["result"].reasons
    assert len(model.calls_for("plan")) == 1
    ex = out["exchanges"]
    assert sum(1 for e in ex if e.get("overlay")) == 2 and tracker.calls == 2
    assert [e["frames"] for e in ex if e["name"] == "view_frames"][:9] == [[k] for k in range(8)] + [[]]
    assert any(e["text"].startswith("plan view 9 not run: a plan runs at most 8 views") for e in ex)
    assert any(e["text"].startswith("plan track 3 not run: at most 2 track_motion runs per round") for e in ex)


@pytest.mark.parametrize("track", [{"start_frame": 30, "end_frame": 5}, {"start_frame": 0, "end_frame": 500}])
def test_a_reversed_or_overlong_stretch_is_tracked_within_the_clip(clip, track):
    out, _, tracker = plan_run(clip, {"views": [], "tracks": [dict(track, points=[[0.3, 0.5]])], "rationale": "x"})
    assert out["result"].status == "scored", out["result"].reasons
    assert [e for e in out["exchanges"] if e.get("overlay")] and tracker.calls == 1


def test_a_plan_with_skipped_entries_survives_the_stage_cache():
    # the stage cache stores model_dump_json and validates it again: the entries kept as written must come back
    from graph.schemas import FrameView, InspectionPlan, TrackRequest

    plan = InspectionPlan.model_validate({"views": [{"frames": []}, {"frames": [3]}],
                                          "tracks": ["x", {"start_frame": 1, "end_frame": 4}]})
    again = InspectionPlan.model_validate_json(plan.model_dump_json(warnings="error"))
    assert again == plan
    assert [type(v) for v in again.views] == [dict, FrameView]
    assert [type(t) for t in again.tracks] == [str, TrackRequest]


def test_the_plan_and_tool_schemas_are_unchanged():
    # stage-cache keys hash the JSON schema / tool specs sent to the model: these are the hashes from before
    from graph.nodes.evidence import tool_specs
    from graph.schemas import InspectionPlan

    def sha(x: object) -> str:
        return hashlib.sha256(json.dumps(x).encode()).hexdigest()

    assert sha(InspectionPlan.model_json_schema()) == "75ac9683483e6bca64d02c42753df4b5cb7e87c9b3f28b316f91ce1021d082c6"
    assert sha(tool_specs(True)) == "ee766cce28efa28f240e6686bcadb9fa20e379226a28815a8835f96f64ca7d81"


def calls_reply(*calls: tuple[str, dict]) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"id": f"c{k}", "name": n, "args": a, "type": "tool_call"}
                                             for k, (n, a) in enumerate(calls)])


def test_track_motion_runs_at_most_twice_per_tools_round(clip):
    # 20 track_motion calls in one reply ran 20 tracking jobs
    tracks = [("track_motion", dict(GOOD_TRACK, points=[[0.04 * k + 0.1, 0.5]])) for k in range(5)]
    script = full_script(inspect=[calls_reply(("view_frames", {"frames": [10]}), *tracks), "done"])
    tracker = CountingTracker()
    agent, _ = make_agent("full", script, tracker=tracker, motion_prefetch="off")
    out = run(agent, clip)
    assert out["result"].status == "scored", out["result"].reasons
    ex = out["exchanges"]
    assert len(ex) == 6 and tracker.calls == 2
    assert [e["call_id"] for e in ex if e.get("overlay")] == ["c1", "c2"]
    refused = [e for e in ex if "not run" in e["text"]]
    assert [e["call_id"] for e in refused] == ["c3", "c4", "c5"]
    assert all(e["frames"] == [] for e in refused)
    assert refused[0]["text"].startswith("track_motion not run: at most 2 track_motion runs per round")


def test_an_invalid_track_call_does_not_spend_the_rounds_cap(clip):
    # a call answered "invalid arguments" ran nothing: the next two valid calls still run
    calls = [("track_motion", {"start_frame": "ten", "end_frame": 20})]
    calls += [("track_motion", dict(GOOD_TRACK, points=[[0.2 * k + 0.1, 0.5]])) for k in range(2)]
    script = full_script(inspect=[calls_reply(*calls), "done"])
    tracker = CountingTracker()
    out = run(make_agent("full", script, tracker=tracker, motion_prefetch="off")[0], clip)
    ex = out["exchanges"]
    assert ex[0]["text"].startswith("invalid arguments for track_motion")
    assert [e["call_id"] for e in ex if e.get("overlay")] == ["c1", "c2"] and tracker.calls == 2


def test_the_cap_is_per_round(clip):
    track = ("track_motion", GOOD_TRACK)
    script = full_script(inspect=[calls_reply(track, track), calls_reply(track), "done"])
    out = run(make_agent("full", script, tracker=CountingTracker(), motion_prefetch="off")[0], clip)
    assert sum(1 for e in out["exchanges"] if e.get("overlay")) == 3
    assert not [e for e in out["exchanges"] if "not run" in e["text"]]


def test_the_plan_step_counts_what_ran(clip):
    plan = {"views": [{"frames": []}, {"frames": [10, 20], "box": [0.1, 0.1, 0.6, 0.6]}],
            "tracks": [{"start_frame": "x", "end_frame": 3}, GOOD_TRACK], "rationale": "check"}
    out, _, _ = plan_run(clip, plan)
    step = next(s for s in out["steps"] if s["node"] == "inspect")
    assert step["decision"] == "plan: 1 view, 1 track executed; 2 not run (invalid or past the caps)"


def test_a_plan_track_with_nan_points_is_skipped_like_the_other_invalid_entries(clip):
    # TrackRequest took NaN and track_motion refused it: the answer lacked the "plan track k not run" label
    bad = {"start_frame": 0, "end_frame": 20, "points": [[float("nan"), 0.5]]}
    out, _, tracker = plan_run(clip, {"views": [], "tracks": [bad, GOOD_TRACK], "rationale": "x"})
    ex = out["exchanges"]
    assert ex[0]["text"].startswith("plan track 1 not run: invalid arguments for track_motion")
    assert "NaN" in ex[0]["text"] and ex[1].get("overlay") and tracker.calls == 1


@pytest.mark.parametrize("mode", ["tools", "plan"])
def test_a_stretch_past_the_clip_says_it_was_clamped(clip, mode):
    # frames past the clip were tracked within it without a word, in both modes
    track = {"start_frame": 10, "end_frame": 500, "points": [[0.3, 0.5]]}
    script = full_script(inspect=[calls_reply(("track_motion", track)), "done"],
                         plan=[{"views": [], "tracks": [track], "rationale": "x"}])
    out = run(make_agent("full", script, inspect_mode=mode, motion_prefetch="off")[0], clip)
    text = next(e for e in out["exchanges"] if e.get("overlay"))["text"]
    assert "stretch 10..500 clamped to the clip's frames 0..32" in text, text


def test_plan_tracks_with_motion_off_are_noted_not_dropped_silently(clip):
    # preset no_motion: a plan's track requests vanished without a word in the trace
    plan = {"views": [{"frames": [10]}], "tracks": [GOOD_TRACK, {"start_frame": "x"}], "rationale": "x"}
    tracker = CountingTracker()
    agent, _ = make_agent("no_motion", full_script(plan=[plan]), tracker=tracker, inspect_mode="plan")
    out = run(agent, clip)
    assert out["result"].status == "scored", out["result"].reasons
    ex = out["exchanges"]
    assert tracker.calls == 0 and not [e for e in ex if e.get("overlay")]
    noted = [e["text"] for e in ex if e["name"] == "track_motion"]
    assert noted == [f"plan track {k} not run: motion evidence is off in this preset" for k in (1, 2)]
    assert any("plan track 2 not run: motion evidence is off" in t for t in plan_summaries(out))
    step = next(s for s in out["steps"] if s["node"] == "inspect")
    assert step["decision"] == "plan: 1 view, 0 tracks executed; 2 not run (motion off)"


LONG = list(range(0, 20))


@pytest.mark.parametrize("mode", ["tools", "plan"])
def test_a_view_of_more_than_16_frames_shows_the_first_16_with_a_note(clip, mode):
    # plan mode skipped such a view whole; tools mode answered "invalid arguments" (List should have at most 16)
    script = full_script(inspect=[calls_reply(("view_frames", {"frames": LONG})), "done"],
                         plan=[{"views": [{"frames": LONG}], "tracks": [], "rationale": "x"}])
    out = run(make_agent("full", script, inspect_mode=mode, motion_prefetch="off")[0], clip)
    assert out["result"].status == "scored", out["result"].reasons
    (ex,) = [e for e in out["exchanges"] if e["name"] == "view_frames"]
    assert ex["frames"] == LONG[:16]
    assert "a view shows at most 16 frames: frames [16, 17, 18, 19] dropped" in ex["text"], ex["text"]


def test_a_long_view_under_the_frame_budget_shows_what_the_budget_allows(clip):
    script = full_script(plan=[{"views": [{"frames": LONG}], "tracks": [], "rationale": "x"}])
    out = run(make_agent("full", script, inspect_mode="plan", motion_prefetch="off", frame_budget=10)[0], clip)
    (ex,) = [e for e in out["exchanges"] if e["name"] == "view_frames"]
    assert ex["frames"] == LONG[:10]
    assert "at most 16 frames" in ex["text"] and "frame budget: showing 10 of 16 frames" in ex["text"], ex["text"]


def test_a_long_crop_view_in_a_plan_crops_the_first_16_frames_with_a_note(clip):
    script = full_script(plan=[{"views": [{"frames": LONG, "box": [0.1, 0.1, 0.6, 0.6]}], "tracks": [],
                                "rationale": "x"}])
    out = run(make_agent("full", script, inspect_mode="plan", motion_prefetch="off")[0], clip)
    crops = [e for e in out["exchanges"] if e["name"] == "view_crop"]
    assert [f for e in crops for f in e["frames"]] == LONG[:16]
    assert "a view shows at most 16 frames: frames [16, 17, 18, 19] dropped" in crops[0]["text"], crops[0]["text"]


NOT_LISTS = [{"frames": [10]}, "frames 10 and 20", 7, None]


@pytest.mark.parametrize("bad", NOT_LISTS)
def test_views_that_are_not_a_list_are_skipped_with_a_note_and_the_tracks_run(clip, bad):
    # a non-list `views` failed the whole InspectionPlan (re-asked, the same way each time): one bad entry did not
    out, model, tracker = plan_run(clip, {"views": bad, "tracks": [GOOD_TRACK], "rationale": "check"})
    assert out["result"].status == "scored", out["result"].reasons
    assert len(model.calls_for("plan")) == 1
    ex = out["exchanges"]
    assert ex[0]["frames"] == [] and ex[0]["text"].startswith("plan views not run: views is not a list"), ex[0]
    assert sum(1 for e in ex if e.get("overlay")) == 1 and tracker.calls == 1
    assert any("plan views not run" in t for t in plan_summaries(out))
    step = next(s for s in out["steps"] if s["node"] == "inspect")
    assert step["decision"] == "plan: 0 views, 1 track executed; 1 not run (invalid or past the caps)"


@pytest.mark.parametrize("bad", NOT_LISTS)
def test_tracks_that_are_not_a_list_are_skipped_with_a_note_and_the_views_run(clip, bad):
    out, model, tracker = plan_run(clip, {"views": [{"frames": [10, 20]}], "tracks": bad, "rationale": "check"})
    assert out["result"].status == "scored", out["result"].reasons
    assert len(model.calls_for("plan")) == 1
    ex = out["exchanges"]
    assert [e["frames"] for e in ex] == [[10, 20], []] and tracker.calls == 0
    assert ex[1]["name"] == "track_motion"
    assert ex[1]["text"].startswith("plan tracks not run: tracks is not a list"), ex[1]["text"]


def test_a_plan_with_parts_that_are_not_lists_survives_the_stage_cache():
    from graph.schemas import InspectionPlan

    plan = InspectionPlan.model_validate({"views": {"frames": [3]}, "tracks": "track the cup"})
    again = InspectionPlan.model_validate_json(plan.model_dump_json(warnings="error"))
    assert again == plan and again.views == {"frames": [3]} and again.tracks == "track the cup"


def test_plan_track_requests_and_track_motion_calls_read_their_arguments_alike():
    # two copies of the same fields and NaN check: a fix to one (the NaN check came to TrackRequest late) missed the other
    from pydantic import ValidationError

    from graph.nodes.evidence import track_motion
    from graph.schemas import TrackRequest

    def fields(model: type) -> dict:
        schema = model.model_json_schema()
        return {k: schema.get(k) for k in ("properties", "required")}

    assert fields(TrackRequest) == fields(track_motion)
    for args in ({"start_frame": 2, "end_frame": 9, "points": [[0.1, 0.2]]}, {"start_frame": 2.0, "end_frame": 9}):
        assert TrackRequest.model_validate(args).model_dump() == track_motion.model_validate(args).model_dump()
    for bad in ({"start_frame": 0, "end_frame": 9, "points": [[float("nan"), 0.2]]}, {"start_frame": True, "end_frame": 9},
                {"start_frame": -1, "end_frame": 9}, {"end_frame": 9}):
        for model in (TrackRequest, track_motion):
            with pytest.raises(ValidationError):
                model.model_validate(bad)


@pytest.mark.parametrize(("part", "bad"), [("views", 7), ("views", {"box": [0.1, 0.1, 0.5, 0.5]}),
                                           ("tracks", "track frames 0-20")])
def test_a_skipped_plan_entry_is_stored_as_written(clip, part, bad):
    # stored "as run" (the tool's own keys only), an entry that never ran was stored as {}: the trace lost it
    plan = {"views": [{"frames": [10]}], "tracks": [], "rationale": "check"}
    plan[part] = [bad] + plan[part]
    out, _, _ = plan_run(clip, plan)
    (skipped,) = [e for e in out["exchanges"] if " not run: " in e["text"]]
    assert skipped["args"] == (bad if isinstance(bad, dict) else {"as_written": bad}), skipped


def test_views_past_the_plan_cap_are_stored_with_their_number(clip):
    # `_past_cap` answers them by one call with {"entries": n}: stored as {}, the number was lost
    out, _, _ = plan_run(clip, {"views": [{"frames": [k]} for k in range(20)], "tracks": [], "rationale": "check"})
    (past,) = [e for e in out["exchanges"] if e["text"].startswith("plan views 9-20 not run")]
    assert past["args"] == {"entries": 12}


def test_a_valid_entry_not_run_is_stored_as_a_plain_dict(clip):
    # a valid entry past a cap is the schema's TrackRequest: stored as {} (the tool's keys only) or, before, as
    # {"as_written": TrackRequest(...)}, an object in the state and checkpoints instead of its arguments
    tracks = [dict(GOOD_TRACK, points=[[0.1 * k, 0.5]]) for k in (1, 2, 3)]
    out, _, _ = plan_run(clip, {"views": [{"frames": [1]}], "tracks": tracks, "rationale": "check"})
    (past,) = [e for e in out["exchanges"] if e["text"].startswith("plan track 3 not run")]
    assert past["args"] == tracks[2]
