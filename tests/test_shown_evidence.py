"""What counts as shown to the model, and what a long clip may show (paper Sec. 3.2, DESIGN §3).

- An inspection tool's images reach the model in the next inspect round, or, for the last round (plan mode,
  or the round cap), only in reflect, which sends the most recent ones when the surprise windows take part of
  its image cap. Every frame a tool returned used to count as shown, so reflect (and later repair and
  final_check) kept citations of frames whose images were never sent.
- On a clip of more than 81 frames, track_motion's overlays showed frames outside the sample and the 16-frame
  allowance, four per call, even once the allowance was spent.
"""

from __future__ import annotations

import pytest
from graph_scripts import assessment, full_script, make_agent, moving_square, run, tool_call

from tools.sampling import NEARBY_EXTRA_LIMIT

ASKED = [1, 2, 3, 4, 6, 7, 10, 11]  # none in the 8-frame sample of the 33-frame clip (0, 5, 9, 14, 18, 23, 27, 32)


@pytest.mark.parametrize("mode", ["plan", "tools"])
def test_tool_frames_reflect_could_not_send_are_not_citable(clip, mode):
    """8 frames asked for in the last (plan mode: only) inspection round; reflect's cap of 8 images takes the
    surprise window's 4 first and then the 4 most recent inspection images (6, 7, 10, 11): frames 1-4 never
    reached the model, so citing them is dropped with a note."""
    revised = assessment(frames=(0,))
    revised["judgments"][0]["evidence_frames"] = [1, 6]
    revised["judgments"][1]["evidence_frames"] = [4]
    script = full_script(plan=[{"views": [{"frames": ASKED}], "tracks": [], "rationale": "check"}],
                         inspect=[tool_call("view_frames", {"frames": ASKED}), "done"], reflect=[revised])
    agent, model = make_agent("full", script, inspect_mode=mode, max_tool_rounds=1, observe_frames=8,
                              frame_budget=8, max_images_per_call=8)
    out = run(agent, clip)
    assert out["sample"] == [0, 5, 9, 14, 18, 23, 27, 32] and out["exchanges"][0]["frames"] == ASKED
    assert model.calls_for("reflect")[0].images() == 8
    before, after = out["assessments"][0], out["assessments"][1]
    assert after.judgment("R1").evidence_frames == [6]
    # R2's restated met cites no frame shown: reflect keeps assess's met, backed by sampled frames
    assert after.judgment("R2") == before.judgment("R2") and before.judgment("R2").evidence_frames == [0, 32]
    assert "reflect: R2 kept met with its earlier evidence frames [0, 32] (restated citing no frame shown)" \
        in out["notes"]
    assert "reflect: R1 cited frames [1] the model was not shown; dropped" in out["notes"]
    assert "reflect: R2 cited frames [4] the model was not shown; dropped (met now cites no frame)" in out["notes"]


def test_frames_of_earlier_tool_rounds_stay_citable(clip):
    """A round followed by another inspect call was sent in that call: its frames count as shown even when
    reflect's cap leaves them out."""
    revised = assessment(frames=(0,))
    revised["judgments"][0]["evidence_frames"] = [1]
    inspect = [tool_call("view_frames", {"frames": [1, 2, 3, 4]}, "c1"),
               tool_call("view_frames", {"frames": [6, 7, 10, 11]}, "c2"), "done"]
    agent, _ = make_agent("full", full_script(inspect=inspect, reflect=[revised]), observe_frames=8,
                          frame_budget=8, max_images_per_call=8)
    out = run(agent, clip)
    assert out["assessments"][1].judgment("R1").evidence_frames == [1]


def test_track_overlays_on_a_long_clip_stay_inside_the_allowance(tmp_path):
    """The allowance spent on 16 viewed frames, a track over frames 40..60 of a 120-frame clip showed overlays
    on 40, 47, 53 and 60 (none sampled): 20 frames beyond the sample. The overlays now use the stretch's
    frames already allowed (the sampled 42, 46, 50, 54, 58) and the run stays within 16."""
    long_clip = moving_square(tmp_path / "long.mp4", frames=120)
    probe = run(make_agent("full")[0], long_clip, run_id="probe")
    sample = set(probe["sample"])
    outside = [f for f in range(120) if f not in sample][:16]
    asks = [tool_call("view_frames", {"frames": outside}, "c1"),
            tool_call("track_motion", {"start_frame": 40, "end_frame": 60, "points": []}, "c2"), "done"]
    out = run(make_agent("full", full_script(inspect=asks))[0], long_clip)
    views, track = out["exchanges"]
    assert views["frames"] == outside
    assert track["overlay"] and track["frames"] and set(track["frames"]) <= sample & set(range(40, 61))
    assert "extra-frame allowance" in track["text"]
    assert len({f for e in out["exchanges"] for f in e["frames"]} - sample) == NEARBY_EXTRA_LIMIT


def test_track_overlays_on_a_long_clip_spend_the_allowance(tmp_path):
    """Overlays on frames outside the sample spend the allowance like viewed frames: a view_frames after them
    finds it smaller, and a view of an overlay frame costs nothing more."""
    long_clip = moving_square(tmp_path / "long.mp4", frames=120)
    asks = [tool_call("track_motion", {"start_frame": 40, "end_frame": 60, "points": []}, "c1"),
            tool_call("view_frames", {"frames": [40, 41]}, "c2"), "done"]
    out = run(make_agent("full", full_script(inspect=asks))[0], long_clip)
    track, views = out["exchanges"]
    assert track["frames"] == [40, 47, 53, 60]  # spread over the stretch, as on a short clip
    assert "overlays on [40, 47, 53, 60]" in track["text"] and "(12 of 16 left)" in track["text"]
    assert views["frames"] == [40, 41] and "frames [41] added from the extra-frame allowance (11 of 16 left)" \
        in views["text"]
