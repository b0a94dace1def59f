"""Records and argument schemas of the inspection step (DESIGN.md §3 "State and schemas"): views, crop boxes and
track requests, the arguments of the inspect tools (`graph.nodes.evidence`) and the entries of plan mode's
`InspectionPlan` (`graph.nodes.inspect`). Split out of `graph.schemas`, which re-exports every public name here, so
`from graph.schemas import InspectionPlan` keeps working; checkpoints that name a record at its old module path
`graph.schemas` still decode (`graph.tracing.traces_serde`).

Decisions where the issue was silent:
- Frame indices are `tools.sampling.FrameIndex`, as in `graph.schemas`.
- Crop boxes are `CropBox`: the schema asks for four numbers, but a box written otherwise (three numbers,
  corner pairs, a null) is kept as written and the crop falls back to the full frame (DESIGN.md §3; paper
  Sec. 3.2: a crop plan that is not valid is shown as the whole frame). Refused by the schema, it failed the whole
  InspectionPlan: every re-ask failed the same way and plan mode's run was ineligible for one bad box.
- The same for a plan's entries: a view or track request that is not valid (a view with no frames, a track
  frame that is not a number, points not [x, y] pairs) is kept as written (`PlanView`, `PlanTrack`), and so
  are entries past the caps (8 views, `TRACKS_PER_ROUND` tracks; the caps are the schema's maxItems only);
  `graph.nodes.inspect` runs the rest of the plan and answers each such entry "not run" with the reason; a `views`
  or `tracks` that is not a list at all (an object, a string, null) is kept as written the same way (`PlanPart`). The
  JSON schema sent to the model is unchanged (stage-cache keys hash it); a plan dumped for the stage cache
  keeps the entries as written, so a cache hit skips them with the same notes.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, TypeVar

from pydantic import (
    BaseModel,
    Field,
    PlainValidator,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    WrapSerializer,
    WrapValidator,
    field_validator,
)

from graph.schema_base import Record as _Record
from tools.sampling import FrameIndex

_FOUR_NUMBERS = TypeAdapter(Annotated[list[float], Field(min_length=4, max_length=4)])


def crop_box(value: object) -> object:
    """A crop box as four floats when it is four numbers (lax: "0.1" reads as 0.1, as before), else the value as
    written, which `graph.nodes.evidence` answers with a full-frame view and the reason (module docstring)."""
    if isinstance(value, list | tuple) and any(isinstance(v, bool) for v in value):
        return value  # lax pydantic read `true` as 1.0: no coordinate (as for FrameIndex)
    try:
        return _FOUR_NUMBERS.validate_python(value)
    except ValidationError:
        return value


CropBox = Annotated[Any, PlainValidator(crop_box), WithJsonSchema(_FOUR_NUMBERS.json_schema())]
"""A pydantic field type for crop boxes: the JSON schema of four numbers, any value accepted (`crop_box`)."""


VIEW_FRAMES = 16
"""Frames one view shows (view_frames' and a plan view's schema maxItems); a longer request shows its first
`VIEW_FRAMES` with a note (`cap_view`), in both inspect modes."""


def cap_view(frames: object) -> tuple[object, str | None]:
    """A view's frames as written cut to the first `VIEW_FRAMES`, and the note naming those dropped (None when
    nothing was): a longer view was refused whole ("invalid arguments" in tools mode, skipped by a plan), so the
    model saw nothing of it, while a request over the frame budget is trimmed with a note."""
    if not isinstance(frames, list) or len(frames) <= VIEW_FRAMES:
        return frames, None
    rest = frames[VIEW_FRAMES:]
    # named when few and all numbers: a view of 3,000 frames named 2,984 in its note, the note as long as the call
    named = f"frames {rest}" if len(rest) <= 8 and all(type(f) is int for f in rest) else f"{len(rest)} more frames"
    return frames[:VIEW_FRAMES], f"a view shows at most {VIEW_FRAMES} frames: {named} dropped"


class FrameView(_Record):
    """Frames to look at again, optionally cropped."""

    frames: list[FrameIndex] = Field(min_length=1, max_length=VIEW_FRAMES, description="Frame indices to view.")
    box: CropBox | None = Field(default=None, description="Optional crop [x0, y0, x1, y1] (see the instructions).")


def no_nan(points: list[list[float]]) -> list[list[float]]:
    """Track points without NaN, which is no position (JSON from a model may carry it; the tracker refuses it);
    raises ValueError naming them. Infinity is left to the caller (moved to the frame's edge)."""
    bad = [p for p in points if any(math.isnan(v) for v in p)]
    if bad:
        raise ValueError(f"points {bad} are not numbers (NaN)")
    return points


class TrackArgs(_Record):
    """The arguments of a track request, shared by plan mode's `TrackRequest` and tools mode's track_motion tool
    (`graph.nodes.evidence`): one definition, so the two cannot drift apart. Each subclass keeps its own name and
    docstring, the title and description of its JSON schema (unchanged: stage-cache keys hash them)."""

    start_frame: FrameIndex = Field(ge=0, description="First frame of the stretch.")
    end_frame: FrameIndex = Field(ge=0, description="Last frame of the stretch.")
    points: list[list[float]] = Field(default_factory=list, max_length=32,
                                      description="[x, y] points on start_frame (see the instructions); "
                                                  "empty = grid.")

    @field_validator("points", mode="before")
    @classmethod
    def _no_booleans(cls, points: object) -> object:
        """A boolean is no coordinate: lax pydantic read `true` as 1.0 and the point was tracked where nobody said
        (refused as `crop_box` and `tools.sampling.frame_index` refuse one; a plan's track is skipped with the
        reason, a track_motion call answered "invalid arguments"). Numeric strings stay lax, as for crop boxes."""
        if isinstance(points, list | tuple):
            for p in points:
                if isinstance(p, list | tuple) and any(isinstance(v, bool) for v in p):
                    raise ValueError(f"point {list(p)} has a boolean coordinate, not a number")
        return points

    @field_validator("points")
    @classmethod
    def _no_nan(cls, points: list[list[float]]) -> list[list[float]]:
        """NaN is no position (JSON from a model may carry it): refused here, it reached the tracker, which refused
        it, and the run was ineligible for the model's typo; a plan's track with one is skipped with the reason like
        any invalid entry. Infinity is moved to the frame's edge (`graph.nodes.evidence.track_points`)."""
        return no_nan(points)


class TrackRequest(TrackArgs):
    """Points to track through a stretch of frames."""


PLAN_VIEWS = 8
"""Views one InspectionPlan runs (its schema's maxItems); later ones are not run, with a note."""
TRACKS_PER_ROUND = 2
"""track_motion runs per inspect round: a plan's tracks (its schema's maxItems) and one tools-mode reply's calls;
the rest are not run, with a note (a tracking job is CPU- or GPU-heavy; `graph.nodes.inspect`)."""
CALLS_PER_ROUND = PLAN_VIEWS + TRACKS_PER_ROUND
"""Tool calls one tools-mode reply runs, as many as a plan's entries: the calls past it are not run and are left out
of the round (not sent back to the model; the round's last answer says how many and why), so a reply of hundreds of
calls neither runs them nor grows every later request and checkpoint by hundreds of exchanges
(`graph.nodes.inspect`)."""


def _as_written(value: object, handler: ValidatorFunctionWrapHandler) -> object:
    """The entry validated, or as written when it is not valid: `graph.nodes.inspect` skips that entry with the
    reason (`entry_error`) and runs the rest of the plan (module docstring)."""
    try:
        return handler(value)
    except ValidationError:
        return value


def _dump_as_written(value: object, handler: SerializerFunctionWrapHandler) -> object:
    return handler(value) if isinstance(value, BaseModel) else value


def entry_error(model: type[BaseModel], value: object) -> str:
    """Why a plan entry kept as written is not a valid `model` (pydantic's message, shortened)."""
    try:
        model.model_validate(value)
    except ValidationError as exc:
        return "; ".join(f"{'.'.join(str(x) for x in e['loc']) or 'entry'}: {e['msg']}" for e in exc.errors())[:300]
    return "valid"


def _part_as_written(value: object, handler: ValidatorFunctionWrapHandler | SerializerFunctionWrapHandler) -> object:
    """A plan's `views` or `tracks` validated (or dumped) when it is a list (its entries are kept as written when
    invalid), else as written (a dict, a string, null): `graph.nodes.inspect` skips that part with the reason and
    runs the other (module docstring)."""
    return handler(value) if isinstance(value, list) else value


PlanView = Annotated[FrameView, WrapValidator(_as_written), WrapSerializer(_dump_as_written)]
"""A plan's view: a FrameView, or the entry as written when it is not one (schema: FrameView's)."""
PlanTrack = Annotated[TrackRequest, WrapValidator(_as_written), WrapSerializer(_dump_as_written)]
"""A plan's track request: a TrackRequest, or the entry as written when it is not one (schema: TrackRequest's)."""

_Entry = TypeVar("_Entry")
PlanPart = Annotated[list[_Entry], WrapValidator(_part_as_written), WrapSerializer(_part_as_written)]
"""A plan's `views` or `tracks`: the list of entries, or the value as written when it is not a list (schema: the
list's)."""


class InspectionPlan(_Record):
    """One structured plan of re-inspection (inspect_mode='plan')."""

    # the caps are the schema's maxItems only: entries past them are kept and not run (a 3-track plan failed whole)
    # a part that is not a list is kept as written too (`PlanPart`): a dict or string `views` failed the whole plan
    views: PlanPart[PlanView] = Field(default_factory=list, json_schema_extra={"maxItems": PLAN_VIEWS},
                                      description="Frame and crop views.")
    tracks: PlanPart[PlanTrack] = Field(default_factory=list, json_schema_extra={"maxItems": TRACKS_PER_ROUND},
                                        description="Motion track requests.")
    rationale: str = Field(default="", max_length=1000, description="Which judgments are uncertain and why.")
