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


def test_frames_are_decoded_at_a_bounded_size(tmp_path, monkeypatch):
    """Every wanted frame (up to 400) was decoded at the clip's full size: 2.5 GB for a 1080p clip."""
    import numpy as np

    import evals.report_frames as rf
    from tools.video import write_video

    frames = np.zeros((3, 64, 96, 3), np.uint8)
    frames[:, :, 48:] = 255  # right half white
    clip = write_video(tmp_path / "wide.mp4", frames, fps=8.0)
    monkeypatch.setattr(rf, "DECODE_LONG_SIDE", 48, raising=False)  # fails on shape, not here, without a bound
    store = rf.load_frames(str(clip), [0, 2])
    assert store.error is None and sorted(store.frames) == [0, 2] and store.total == 3
    assert store.frames[2].shape == (32, 48, 3)  # aspect kept
    assert store.frames[2][:, :20].max() < 40 and store.frames[2][:, 28:].min() > 215  # the same picture
    assert store.url(2, 256, [0.5, 0.0, 1.0, 1.0]).startswith("data:image/jpeg;base64,")
    assert rf.decode_size(1920, 1080, 768) == (768, 432) and rf.decode_size(300, 200, 768) == (300, 200)
    monkeypatch.setattr(rf, "DECODE_LONG_SIDE", 768)
    assert rf.load_frames(str(clip), [1]).frames[1].shape == (64, 96, 3)  # a smaller clip keeps its size


def test_every_frame_the_page_links_to_is_decoded():
    """The frames section gives each linked frame a figure (`evals.report_frame_section._linked_frames`), but the
    frames of the observed events were never decoded: an event's frame link led to a figure without a picture."""
    from evals.report_frame_section import _linked_frames

    run = {**_run({"start_frame": 0, "end_frame": 0}),
           "observation": {"events": [{"start_frame": 12, "end_frame": 17, "description": "the block moves"}]}}
    assert _linked_frames(run, []) <= wanted_indices(run)
