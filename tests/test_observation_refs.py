"""The task-blind observation's event frames are frames of the clip: an event the observer placed past the clip's
last frame was kept as written, so assess and the audit read (and the report linked) frames the clip does not have."""

from __future__ import annotations

from graph_scripts import OBSERVATION, full_script, make_agent, run


def test_observe_drops_or_clamps_event_frames_outside_the_clip(clip):
    """The 33-frame clip has frames 0..32: an event ending at 40 ends at 32, one starting at 35 names no frame of it."""
    events = [{"start_frame": 0, "end_frame": 40, "description": "a red square slides to the right"},
              {"start_frame": 35, "end_frame": 38, "description": "the square vanishes"},
              {"start_frame": 3, "end_frame": 9, "description": "the square moves"}]
    agent, model = make_agent("task_blind", full_script(observe=[{**OBSERVATION, "events": events}]))
    out = run(agent, clip)
    got = [(e.start_frame, e.end_frame, e.description) for e in out["observation"].events]
    assert got == [(0, 32, "a red square slides to the right"), (3, 9, "the square moves")]
    notes = out["result"].notes
    assert "observe: event 'a red square slides to the right' ends at frame 40, past the clip (0..32); it ends at 32 now" \
        in notes
    assert "observe: event 'the square vanishes' at frames 35..38 is outside the clip (0..32); dropped" in notes
    assert "the square vanishes" not in model.calls_for("assess")[0].text()
    assert out["result"].status == "scored"


def test_an_observation_inside_the_clip_is_kept_as_written(clip):
    agent, _ = make_agent("task_blind")
    out = run(agent, clip)
    assert out["observation"].model_dump(mode="json")["events"] == OBSERVATION["events"]
    assert not any(n.startswith("observe:") for n in out["result"].notes)
