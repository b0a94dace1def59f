"""Which frames a run's report decodes (`evals.report_frames`)."""

from __future__ import annotations

from evals.report_frames import wanted_indices


def _run(args: object) -> dict:
    return {"meta": {"frames": 40}, "sample": [0, 39],
            "exchanges": [{"name": "track_motion", "args": args, "frames": [],
                           "text": "invalid arguments for track_motion: ..."}]}


def test_a_refused_track_call_with_bad_frame_numbers_does_not_crash_the_report():
    """The model's raw arguments of an invalid track_motion call were passed to int(): a report of a run
    whose model wrote "start_frame": "begin" (or null) failed with ValueError (TypeError)."""
    for args in ({"start_frame": "begin", "end_frame": 10}, {"start_frame": None, "end_frame": 10},
                 {"start_frame": 0, "end_frame": [3]}, ["not", "a", "dict"]):
        assert wanted_indices(_run(args)) == {0, 39}, args


def test_a_valid_track_call_adds_its_tracked_frames():
    from evals.report_frames import track_span

    assert track_span(["not", "a", "dict"]) is None and track_span({"start_frame": None}) is None
    assert track_span({"start_frame": "5", "end_frame": 9.0}) == (5, 9)
    assert track_span({}) == (0, 0)
    wanted = wanted_indices(_run({"start_frame": 5, "end_frame": 9}))
    assert {5, 6, 7, 8, 9} <= wanted and {0, 39} <= wanted
