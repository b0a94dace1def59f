"""AgentConfig.coordinates: crop boxes and track points in the model's own convention (fractions,
thousandths, or pixels of the frames it was shown) reach the same region of the frame."""

from __future__ import annotations

import numpy as np
import pytest
from graph_scripts import full_script, grid_followup, make_agent, run, tool_call

from graph.settings import BackboneSettings, SettingsError
from tools.coords import shown_size, to_unit_coords
from tools.motion import LKTracker

QUARTERS = {"unit": [0.25, 0.25, 0.75, 0.75], "per_mille": [250, 250, 750, 750], "pixels": [32, 32, 96, 96]}


def test_conversion_and_shown_size_hand_computed():
    assert to_unit_coords([0.1, 0.2, 0.3, 0.4], "unit", (0, 0)) == [0.1, 0.2, 0.3, 0.4]
    assert to_unit_coords([100, 250, 500, 1000], "per_mille", (0, 0)) == [0.1, 0.25, 0.5, 1.0]
    assert to_unit_coords([64, 36, 128, 72], "pixels", (512, 288)) == [0.125, 0.125, 0.25, 0.25]
    assert to_unit_coords([256, 144], "pixels", (512, 288)) == [0.5, 0.5]  # a point
    with pytest.raises(ValueError, match="coordinates"):
        to_unit_coords([1, 2], "percent", (1, 1))  # type: ignore[arg-type]
    assert shown_size(1920, 1080, 512) == (512, 288)
    assert shown_size(480, 832, 512) == (295, 512)  # 480 * 512 / 832 = 295.4
    assert shown_size(128, 128, 512) == (128, 128)  # never upscaled


@pytest.mark.parametrize("coordinates", ["unit", "per_mille", "pixels"])
def test_each_convention_crops_the_same_region(clip, coordinates):
    box = QUARTERS[coordinates]  # the 128x128 clip is shown at its own size
    script = full_script(inspect=[tool_call("view_crop", {"frame": 10, "box": box}), "done"])
    agent, model = make_agent("full", script, coordinates=coordinates)
    out = run(agent, clip)
    ex = out["exchanges"][0]
    assert ex["box"] == pytest.approx([0.25, 0.25, 0.75, 0.75]) and f"crop {box}" in ex["text"]
    # the crop's image is labelled in the model's coordinates: fractions invited the next box in fractions
    assert "frame 10 of 33" in model.calls_for("inspect")[1].text()
    assert f"crop {box}" in model.calls_for("inspect")[1].text().split("frame 10 of 33", 1)[1]
    prompt = model.calls_for("inspect")[0].messages[0].content
    expected = {"unit": "fractions of the frame's width and height (0..1",
                "per_mille": "thousandths of the frame's width and height (0..1000",
                "pixels": "pixels of the frames as you see them (128x128; [0, 0, 128, 128]"}[coordinates]
    assert expected in prompt


def test_pixels_are_those_of_the_image_sent(clip):
    """With frames sent at long side 64, the model's pixel box refers to a 64x64 image."""
    from langgraph.checkpoint.memory import InMemorySaver

    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.frame_store import FrameStore
    from graph.testing import ScriptedChatModel
    from tests.graph_scripts import FakeSurprise

    model = ScriptedChatModel(full_script(inspect=[tool_call("view_crop", {"frame": 3, "box": [16, 16, 48, 48]}), "ok"]))
    agent = build_reward_agent(AgentConfig(coordinates="pixels"), backbone=Backbone(model, retry_wait=(0.0, 0.0)),
                               tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()),
                               checkpointer=InMemorySaver(), frame_store=FrameStore(long_side=64))
    out = run(agent, clip)
    assert out["exchanges"][0]["box"] == pytest.approx([0.25, 0.25, 0.75, 0.75])
    assert "(64x64; [0, 0, 64, 64]" in model.calls_for("inspect")[0].messages[0].content


def test_a_pixel_box_read_as_fractions_falls_back_and_names_the_setting(clip):
    script = full_script(inspect=[tool_call("view_crop", {"frame": 10, "box": [32, 32, 96, 96]}), "done"])
    agent, _ = make_agent("full", script)  # coordinates="unit"
    ex = run(agent, clip)["exchanges"][0]
    assert ex["box"] is None and "full frame" in ex["text"] and "RAA_COORDINATES" in ex["text"]


class RecordingTracker(LKTracker):
    """LK tracker that records the query points it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[np.ndarray | None] = []

    def track(self, frames, *, grid_size=None, queries=None):  # noqa: ANN001, ANN201 (protocol)
        if not grid_followup(frames, queries):  # a grid track's second call is part of the same track
            self.queries.append(None if queries is None else np.array(queries))
        return super().track(frames, grid_size=grid_size, queries=queries)


def test_track_points_convert_and_points_off_the_frame_are_reported(clip):
    """Before, points were clamped to [0, 1] silently: a pixel point [64, 64] tracked the far corner. The
    next inspect round and reflect replay the overlays from the converted points the call tracked: they
    were replayed from the raw args, so the tracker got [63500, 63500] and the run was ineligible."""
    tracker = RecordingTracker()
    script = full_script(inspect=[tool_call("track_motion", {"start_frame": 0, "end_frame": 32,
                                                             "points": [[500, 500], [1500, 250]]}), "done"])
    agent, model = make_agent("full", script, tracker=tracker, coordinates="per_mille", motion_prefetch="off")
    out = run(agent, clip)
    assert out["result"].status == "scored", out["result"].reasons
    queries = [q for q in tracker.queries if q is not None]
    assert len(queries) == 1  # the replays reuse the call's overlays
    assert np.allclose(queries[0][:, 1:], [[63.5, 63.5], [127.0, 31.75]])  # (128 - 1) * fraction, clamped
    ex = out["exchanges"][0]
    assert "points [1500, 250] lie outside the frame" in ex["text"]
    assert ex["points"] == [[0.5, 0.5], [1.0, 0.25]] and ex["query_frame"] == 0
    assert all(c.text().count("(motion-track overlay)") == 4
               for c in (model.calls_for("inspect")[1], model.calls_for("reflect")[0]))


@pytest.mark.parametrize(("coordinates", "points", "tracked"), [
    ("unit", [[1.5, 0.5]], [[1.0, 0.5]]),  # off the frame: moved to its edge
    ("unit", [[0.5]], []),  # not [x, y]: none readable, a grid instead (the replay raised IndexError)
    ("unit", [[0.5, 0.5, 0.1], [0.25, 0.75]], [[0.25, 0.75]]),  # the replay tracked [0.5, 0.5] too
    ("pixels", [[64, 32]], [[0.5, 0.25]]),
])
def test_track_overlays_replay_the_points_tracked(clip, coordinates, points, tracked):
    tracker = RecordingTracker()
    script = full_script(inspect=[tool_call("track_motion", {"start_frame": 20, "end_frame": 4, "points": points}),
                                  "done"])
    agent, model = make_agent("full", script, tracker=tracker, coordinates=coordinates, motion_prefetch="off")
    out = run(agent, clip)
    assert out["result"].status == "scored", out["result"].reasons
    ex = out["exchanges"][0]
    assert ex["points"] == tracked and ex["query_frame"] == 20
    assert len(tracker.queries) == 1  # one track; the next round and reflect replay its overlays
    assert all(c.text().count("(motion-track overlay)") == 4
               for c in (model.calls_for("inspect")[1], model.calls_for("reflect")[0]))


def test_a_track_whose_points_are_all_unreadable_says_a_grid_was_tracked_instead(clip):
    """Every point malformed ([[0.5]]): the tool tracked its default grid and the only note said the point was
    "left out", so the model, which asked for specific points, read the grid's summary as theirs. As an unreadable
    crop box falls back to the full frame and says so, the grid stays and the text says none of the points could
    be read and a grid was tracked instead."""
    tracker = RecordingTracker()
    script = full_script(inspect=[tool_call("track_motion", {"start_frame": 0, "end_frame": 20,
                                                             "points": [[0.5], [0.1, 0.2, 0.3]]}), "done"])
    agent, _ = make_agent("full", script, tracker=tracker, motion_prefetch="off")
    out = run(agent, clip)
    assert out["result"].status == "scored", out["result"].reasons
    ex = out["exchanges"][0]
    assert ex["points"] == [] and len(tracker.queries) == 1  # a grid: no points kept, one track
    assert "none of the 2 points given could be read" in ex["text"], ex["text"]
    assert "tracked a grid instead" in ex["text"] and "left out" not in ex["text"], ex["text"]


def test_a_track_with_some_readable_points_tracks_only_those(clip):
    tracker = RecordingTracker()
    script = full_script(inspect=[tool_call("track_motion", {"start_frame": 0, "end_frame": 20,
                                                             "points": [[0.5], [0.25, 0.75]]}), "done"])
    agent, _ = make_agent("full", script, tracker=tracker, motion_prefetch="off")
    ex = run(agent, clip)["exchanges"][0]
    assert ex["points"] == [[0.25, 0.75]] and "point [0.5] is not [x, y]; left out" in ex["text"], ex["text"]
    assert "grid" not in ex["text"], ex["text"]


def test_plan_mode_tracks_use_the_convention(clip):
    plan = {"views": [{"frames": [10]}], "tracks": [{"start_frame": 0, "end_frame": 32, "points": [[500, 500]]}],
            "rationale": "check"}
    tracker = RecordingTracker()
    agent, _ = make_agent("full", full_script(plan=[plan]), tracker=tracker, inspect_mode="plan",
                          coordinates="per_mille", motion_prefetch="off")
    out = run(agent, clip)
    assert out["result"].status == "scored", out["result"].reasons  # reflect replayed [500, 500] as pixels
    assert out["exchanges"][1]["points"] == [[0.5, 0.5]] and len(tracker.queries) == 1


def test_a_track_record_without_points_replays_its_converted_args(clip):
    """Records checkpointed before `points` was stored convert their args the way the call did."""
    import asyncio

    from graph import AgentConfig
    from graph.backbone import Backbone
    from graph.context import AgentTools, RunContext, tool_provider
    from graph.nodes.evidence import exchange_blocks
    from graph.testing import ScriptedChatModel

    script = full_script(inspect=[tool_call("track_motion", {"start_frame": 20, "end_frame": 4,
                                                             "points": [[500, 500]]}), "done"])
    agent, _ = make_agent("full", script, coordinates="per_mille", motion_prefetch="off")
    out = run(agent, clip)
    new = out["exchanges"][0]
    old = {k: v for k, v in new.items() if k not in ("points", "query_frame")}
    for record in (new, old):  # each replayed in a fresh frame store: its overlays are tracked again
        tracker = RecordingTracker()
        ctx = RunContext(backbone=Backbone(ScriptedChatModel({})), tools=tool_provider(AgentTools(tracker=tracker)),
                         config=AgentConfig(coordinates="per_mille", motion_prefetch="off").resolved())
        blocks = asyncio.run(exchange_blocks(out, ctx, record))
        assert sum(b["type"] == "image_url" for b in blocks) == 4
        assert np.allclose(tracker.queries[0], [[16.0, 63.5, 63.5]])  # on frame 20, the last of 4..20


def test_plan_mode_boxes_use_the_convention(clip):
    script = full_script(plan=[{"views": [{"frames": [30], "box": [0, 0, 500, 500]}], "tracks": []}])
    agent, model = make_agent("full", script, inspect_mode="plan", coordinates="per_mille")
    out = run(agent, clip)
    assert out["exchanges"][0]["box"] == pytest.approx([0.0, 0.0, 0.5, 0.5])
    assert "thousandths" in model.calls_for("plan")[0].messages[0].content


def test_setting_reaches_the_agent_config():
    settings = BackboneSettings.from_env({"RAA_COORDINATES": "pixels"})
    assert settings.coordinates == "pixels" and settings.agent_config("full").coordinates == "pixels"
    assert BackboneSettings.from_env({}).agent_config("full").coordinates == "unit"
    with pytest.raises(SettingsError, match="RAA_COORDINATES"):
        BackboneSettings.from_env({"RAA_COORDINATES": "percent"})
