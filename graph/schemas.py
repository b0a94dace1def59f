"""Pydantic records of the reward agent (DESIGN.md §3 "State and schemas").

LLM-written records (Observation, TaskContract, Assessment, InspectionPlan, AuditReport, FinalCheck,
DirectScore) have described, bounded fields so a server's json_schema mode constrains them. Records
written by code (MotionEvidence, Fault, RewardResult) use the same style.

Decisions where the issue was silent:
- Rubric levels are integers 1..5 (1 = severe violations / unusable, 5 = fully plausible / clean);
  `graph.gate.score_mapping` maps them linearly to [0, 1].
- Contract ids equal up to case and spaces (`requirement_key`: "R1", "r1") are refused like a duplicate id
  (re-asked, naming them): judgments and audit findings name ids up to case, so "r1" could mean either.
- `AuditReport.clean` is recomputed: a report that lists any issue is never clean, whatever the
  model wrote; one written `clean: false` that lists no issue contradicts itself and is refused (re-asked;
  recomputed, it read as a clean audit). A report built without `clean` (by code) is recomputed as before.
- `DirectScore.reward` is only used by the `direct` preset, the paper's direct-scoring baseline;
  every other preset maps structured judgments through fixed code.
- QualityCheck and SurpriseEvidence are the tools' own records, re-exported here.
- A reply of `{}` is no Observation and no AuditReport (`EMPTY_IS_NO_ANSWER`): re-asked, in the parsing step.
- Rubric levels and the direct reward refuse a boolean (`not_boolean`; lax pydantic read `true` as 1).
- Frame indices are `tools.sampling.FrameIndex`: an int or a whole float, never a boolean or a string
  (lax pydantic read `true` as frame 1 and "3" as frame 3); a reply that writes one is re-asked.
- Crop boxes are `CropBox`: the schema asks for four numbers, but a box written otherwise (three numbers,
  corner pairs, a null) is kept as written and the crop falls back to the full frame (DESIGN.md §3; paper
  Sec. 3.2: invalid crop plans fall back to full-frame views). Refused by the schema, it failed the whole
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
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
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
    model_validator,
)

from graph.config import INSTRUCTION_CHARS_LIMIT
from tools.sampling import FrameIndex

Status = Literal["met", "partial", "not_met", "unverifiable"]
RequirementKind = Literal["action", "object", "order", "outcome"]
RewardStatus = Literal["scored", "zero", "ineligible"]

_Text = Field(default="", max_length=2000)

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


def not_boolean(value: object) -> object:
    """`value`, unless it is a boolean (ValueError): lax pydantic read `true` as rubric level 1 (P or V = 0) or
    as the direct reward 1.0, a number the model never wrote; such a reply is re-asked."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got the boolean {value!r}")
    return value


Level = Annotated[int, BeforeValidator(not_boolean)]
"""A rubric level's type: an int as pydantic reads it, never a boolean (its JSON schema stays "integer")."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ObservedEvent(_Record):
    """One thing that visibly happens in a stretch of the clip."""

    start_frame: FrameIndex = Field(ge=0, le=100_000, description="First frame index where the event is visible.")
    end_frame: FrameIndex = Field(ge=0, le=100_000, description="Last frame index where the event is visible.")
    description: str = Field(max_length=500, description="What is seen, in neutral terms (no task words).")


class Observation(_Record):
    """Task-blind description of the clip, written before the instruction is known."""

    scene: str = Field(default="", max_length=1000, description="Scene, robot and objects present at the start.")
    events: list[ObservedEvent] = Field(default_factory=list, max_length=48,
                                        description="Timeline of visible events with frame references.")
    objects: list[str] = Field(default_factory=list, max_length=32, description="Visible objects, short names.")
    visual_issues: list[str] = Field(default_factory=list, max_length=16,
                                     description="Blur, occlusion, flicker, frozen frames, artefacts, etc.")
    summary: str = Field(default="", max_length=2000, description="Two or three sentences: what happens.")


class Requirement(_Record):
    """One checkable requirement extracted from the instruction."""

    id: str = Field(min_length=1, max_length=16, description="Short id, e.g. R1.")
    kind: RequirementKind = Field(description="action | object | order | outcome.")
    text: str = Field(min_length=1, max_length=INSTRUCTION_CHARS_LIMIT, description="The requirement in one sentence.")
    essential: bool = Field(default=True, description="True when the task fails without it.")


def requirement_key(requirement_id: str) -> str:
    """An id up to case and spaces, as judgments and audit findings name it (`graph.nodes.common.contract_id`)."""
    return requirement_id.strip().casefold()


class TaskContract(_Record):
    """The frozen list of requirements a clip must show to complete the instruction."""

    requirements: list[Requirement] = Field(min_length=1, max_length=16,
                                            description="Actions, objects, ordering and outcomes required.")
    notes: str = Field(default="", max_length=1000, description="Ambiguities in the instruction, if any.")

    @model_validator(mode="after")
    def _unique_ids(self) -> TaskContract:
        ids = [r.id for r in self.requirements]
        if len(set(ids)) != len(ids):
            raise ValueError(f"requirement ids must be unique, got {ids}")
        first: dict[str, str] = {}
        for i in ids:
            if (other := first.setdefault(requirement_key(i), i)) != i:
                raise ValueError(f"requirement ids {other!r} and {i!r} are equal up to letter case and spaces "
                                 f"(judgments name ids up to case): make them distinct, got {ids}")
        return self


class RequirementJudgment(_Record):
    """The verdict on one contract requirement, tied to frames."""

    requirement_id: str = Field(min_length=1, max_length=16, description="Id of the contract requirement.")
    status: Status = Field(description="met | partial | not_met | unverifiable.")
    evidence_frames: list[FrameIndex] = Field(default_factory=list, max_length=32,
                                       description="Frame indices that show the evidence.")
    rationale: str = Field(default="", max_length=1000, description="Why, citing what the frames show.")
    confidence: float = Field(default=0.5, ge=0.0, le=1.0, description="Confidence in this status, 0..1.")


class Assessment(_Record):
    """Requirement-level judgments plus physical and visual rubric levels."""

    judgments: list[RequirementJudgment] = Field(default_factory=list, max_length=16,
                                                 description="One judgment per contract requirement.")
    physical_level: Level = Field(ge=1, le=5, description="Physical plausibility 1 (violations) .. 5 (plausible).")
    physical_rationale: str = Field(default="", max_length=1000, description="Physical issues seen, with frames.")
    visual_level: Level = Field(ge=1, le=5, description="Visual quality 1 (unusable) .. 5 (clean).")
    visual_rationale: str = Field(default="", max_length=1000, description="Visual issues seen, with frames.")

    def judgment(self, requirement_id: str) -> RequirementJudgment | None:
        """The judgment for one requirement id, if present."""
        for j in self.judgments:
            if j.requirement_id == requirement_id:
                return j
        return None


VIEW_FRAMES = 16
"""Frames one view shows (view_frames' and a plan view's schema maxItems); a longer request shows its first
`VIEW_FRAMES` with a note (`cap_view`), in both inspect modes."""


def cap_view(frames: object) -> tuple[object, str | None]:
    """A view's frames as written cut to the first `VIEW_FRAMES`, and the note naming those dropped (None when
    nothing was): a longer view was refused whole ("invalid arguments" in tools mode, skipped by a plan), so the
    model saw nothing of it, while a request over the frame budget is trimmed with a note."""
    if not isinstance(frames, list) or len(frames) <= VIEW_FRAMES:
        return frames, None
    return frames[:VIEW_FRAMES], f"a view shows at most {VIEW_FRAMES} frames: frames {frames[VIEW_FRAMES:]} dropped"


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


class MotionEvidence(_Record):
    """Summary of one motion-tracking run (written by code)."""

    frames: list[FrameIndex] = Field(default_factory=list, description="Frame indices tracked.")
    points: int = Field(default=0, ge=0, description="Number of tracked points.")
    summary: str = Field(default="", max_length=4000, description="Text summary shown to the model.")


class AuditReport(_Record):
    """Scope audit of the assessment against the contract."""

    missing_requirements: list[str] = Field(default_factory=list, max_length=16,
                                            description="Contract requirement ids without a sound judgment.")
    invented_conditions: list[str] = Field(default_factory=list, max_length=16,
                                           description="Conditions judged that the contract does not contain.")
    contradictions: list[str] = Field(default_factory=list, max_length=16,
                                      description="Judgments that contradict each other or the frames cited.")
    clean: bool = Field(default=False, description="True when nothing needs repair.")

    @model_validator(mode="after")
    def _clean_means_no_issue(self) -> AuditReport:
        issues = bool(self.missing_requirements or self.invented_conditions or self.contradictions)
        if not issues and "clean" in self.model_fields_set and not self.clean:
            raise ValueError("clean is false but the report names no issue: list the issues, or write clean true")
        self.clean = not issues
        return self


EMPTY_IS_NO_ANSWER: frozenset[type[BaseModel]] = frozenset({Observation, AuditReport})
"""Model-written records whose fields all have defaults, for which a reply of `{}` is refused and re-asked
(`graph.validation.check_fields`): it validated as an observation of nothing, or as a clean audit (no repair).
A reply naming any field passes (`{"clean": true}` is an audit). An InspectionPlan `{}` stays a plan (nothing to
re-inspect): inspection only gathers evidence. The JSON schemas are unchanged (stage-cache keys hash them). A
stage-cache entry `{}` (stored before this check) is a miss, not served (`graph.validation.decode_stored`)."""


class FinalCheck(_Record):
    """Final visual check for the failure gate."""

    failure_established: bool = Field(description="The frames establish that the task failed.")
    essential_unverifiable: bool = Field(description="An essential requirement cannot be verified from the frames.")
    rationale: str = Field(default="", max_length=1000, description="Why, citing frames.")
    evidence_frames: list[FrameIndex] = Field(default_factory=list, max_length=32, description="Frames relied on.")


class DirectScore(_Record):
    """Direct base-model scoring (preset `direct` only): the model writes the reward itself."""

    reward: Annotated[float, BeforeValidator(not_boolean)] = Field(
        ge=0.0, le=1.0, description="Reward in 0..1 for task completion and quality.")
    rationale: str = Field(default="", max_length=1000, description="Why this reward.")


FaultKind = Literal["transport", "timeout", "invalid_reply", "empty_reply", "refused", "tool", "video",
                    "input", "internal", "settings"]


class Fault(_Record):
    """A failure that makes the evaluation ineligible (reward None)."""

    stage: str = Field(max_length=64, description="Node where the fault happened.")
    kind: str = Field(max_length=64, description="transport | timeout | invalid_reply | tool | video | input | ...")
    message: str = Field(max_length=2000, description="What went wrong.")

    def reason(self) -> str:
        """One-line reason for RewardResult.reasons."""
        return f"{self.stage}: {self.kind}: {self.message}"


class RewardResult(_Record):
    """The agent's output for one clip (DESIGN.md §3)."""

    reward: float | None = Field(default=None, ge=0.0, le=1.0, description="Reward; None means ineligible.")
    status: RewardStatus = Field(description="scored | zero | ineligible.")
    T: float | None = Field(default=None, ge=0.0, le=1.0, description="Task completion from fixed mapping.")
    P: float | None = Field(default=None, ge=0.0, le=1.0, description="Physical plausibility from fixed mapping.")
    V: float | None = Field(default=None, ge=0.0, le=1.0, description="Visual quality from fixed mapping.")
    failure: bool | None = Field(default=None, description="Failure established (gate input F).")
    unverifiable: bool | None = Field(default=None, description="Essential requirement unverifiable (gate input U).")
    reasons: list[str] = Field(default_factory=list, description="Why this result (always set when not scored).")
    notes: list[str] = Field(default_factory=list,
                             description="The run's process notes (frame budgets, dropped citations, repair "
                                         "decisions), also the last entries of reasons.")
    run_id: str = Field(default="", description="Thread id of the run's trace.")
    preset: str = Field(default="", description="Preset label.")
    overrides: dict[str, bool | int | str] = Field(
        default_factory=dict, description="Settings that differ from the preset's (`graph.config.config_overrides`); "
                                          "empty for the plain preset.")
    usage: dict[str, int] = Field(default_factory=dict, description="calls, images, input_tokens, output_tokens.")
    trace_saved: bool = Field(default=True, description="False when the run's trace could not be saved (the "
                                                         "result stands; its last reason and note say why).")

    @model_validator(mode="after")
    def _consistent(self) -> RewardResult:
        if self.status == "ineligible" and (self.reward is not None or not self.reasons):
            raise ValueError("an ineligible result has reward None and at least one reason")
        if self.status != "ineligible" and self.reward is None:
            raise ValueError(f"status {self.status!r} needs a reward")
        if self.status == "zero" and self.reward != 0.0:
            raise ValueError("status 'zero' needs reward 0")
        return self


from tools.quality import QualityCheck  # noqa: E402  (re-exported record of the quality pre-check)
from tools.surprise import SurpriseEvidence  # noqa: E402  (re-exported WMReward record)

__all__ = ["VIEW_FRAMES", "Assessment", "AuditReport", "DirectScore", "Fault", "FinalCheck", "FrameView", "InspectionPlan",
           "MotionEvidence", "Observation", "ObservedEvent", "QualityCheck", "Requirement", "RequirementJudgment",
           "RewardResult", "SurpriseEvidence", "TaskContract", "TrackRequest"]
