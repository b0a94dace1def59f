"""Frame indices and named numbers in the agent's records are checked, not coerced: a frame index written
`true` used to become frame 1 and "3" frame 3 without a word, and an extra tool's value NaN reached the
reflect prompt as "nan"."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from graph.nodes.evidence import track_motion, view_crop, view_frames
from graph.schemas import (
    FinalCheck,
    FrameView,
    MotionEvidence,
    ObservedEvent,
    RequirementJudgment,
    TrackRequest,
)
from tools.extra import EvidenceReport

BAD_INDICES = [True, False, 1.5, "3", None, np.bool_(True)]


def _judgment(frames: list) -> dict:
    return {"requirement_id": "R1", "status": "met", "evidence_frames": frames}


@pytest.mark.parametrize("bad", BAD_INDICES, ids=repr)
def test_frame_index_lists_refuse_what_is_not_an_integer(bad):
    cases = [
        (RequirementJudgment, _judgment([2, bad])),
        (FinalCheck, {"failure_established": False, "essential_unverifiable": False, "evidence_frames": [bad]}),
        (FrameView, {"frames": [bad]}),
        (MotionEvidence, {"frames": [bad]}),
        (EvidenceReport, {"summary": "x", "frames": [bad]}),
        (view_frames, {"frames": [bad]}),
    ]
    for model, data in cases:
        with pytest.raises(ValidationError, match="frame index must be an integer"):
            model.model_validate(data)


@pytest.mark.parametrize("bad", [True, 2.5, "4"], ids=repr)
def test_single_frame_fields_refuse_what_is_not_an_integer(bad):
    cases = [
        (ObservedEvent, {"start_frame": bad, "end_frame": 9, "description": "moves"}),
        (ObservedEvent, {"start_frame": 0, "end_frame": bad, "description": "moves"}),
        (TrackRequest, {"start_frame": bad, "end_frame": 9}),
        (track_motion, {"start_frame": 0, "end_frame": bad}),
        (view_crop, {"frame": bad, "box": [0, 0, 1, 1]}),
    ]
    for model, data in cases:
        with pytest.raises(ValidationError, match="frame index must be an integer"):
            model.model_validate(data)


def test_json_replies_are_checked_the_same_way():
    with pytest.raises(ValidationError, match="frame index must be an integer"):
        RequirementJudgment.model_validate_json('{"requirement_id": "R1", "status": "met", "evidence_frames": [true]}')
    with pytest.raises(ValidationError, match="frame index must be an integer"):
        RequirementJudgment.model_validate_json('{"requirement_id": "R1", "status": "met", "evidence_frames": ["3"]}')


def test_integers_numpy_integers_and_whole_floats_stay_accepted():
    """A whole number written 7.0 names one frame exactly (JSON writers do that); numpy integers are what a
    researcher's tool computes with."""
    j = RequirementJudgment.model_validate_json('{"requirement_id": "R1", "status": "met", '
                                                '"evidence_frames": [3, 7.0]}')
    assert j.evidence_frames == [3, 7] and all(type(f) is int for f in j.evidence_frames)
    report = EvidenceReport(summary="x", frames=[np.int64(5), 6])
    assert report.frames == [5, 6] and all(type(f) is int for f in report.frames)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, np.float64("nan")], ids=repr)
def test_evidence_report_values_must_be_finite(bad):
    with pytest.raises(ValidationError, match="finite"):
        EvidenceReport(summary="x", values={"peak": bad})
    assert EvidenceReport(summary="x", values={"peak": 0.5, "n": 3}).values == {"peak": 0.5, "n": 3.0}


@pytest.mark.parametrize("whole", [np.float32(3.0), np.float16(3.0), np.float64(3.0), 3.0], ids=repr)
def test_a_whole_numpy_float_is_a_frame_index_like_a_python_one(whole):
    """An extra tool's frames as numpy floats: np.float64 (a float subclass) was frame 3, np.float32 was refused,
    and the run was ineligible for the same number."""
    assert EvidenceReport.model_validate({"summary": "x", "frames": [whole]}).frames == [3]
    with pytest.raises(ValidationError, match="frame index must be an integer"):
        EvidenceReport.model_validate({"summary": "x", "frames": [type(whole)(2.5)]})
