"""Pydantic records of the reward agent (DESIGN.md §3 "State and schemas").

LLM-written records (Observation, TaskContract, Assessment, InspectionPlan, AuditReport, FinalCheck,
DirectScore) have described, bounded fields so a server's json_schema mode constrains them. Records
written by code (MotionEvidence, Fault, RewardResult) use the same style.

Decisions where the issue was silent:
- Rubric levels are integers 1..5 (1 = severe violations / unusable, 5 = fully plausible / clean);
  `graph.gate.score_mapping` maps them linearly to [0, 1].
- An assessment judging one requirement (ids up to case and spaces) twice with different statuses is refused
  (re-asked; a model that keeps contradicting itself makes the run ineligible): which verdict stood was decided by
  the reply's order (`tidy_refs` kept the first), so "met, then not_met" paid full credit. A restatement with
  the same status stays valid (`tidy_refs` keeps the first and notes the second).
- Contract ids equal up to case and spaces (`requirement_key`: "R1", "r1") are refused like a duplicate id
  (re-asked, naming them): judgments and audit findings name ids up to case, so "r1" could mean either.
- `AuditReport.clean` is recomputed: a report that lists any issue is never clean, whatever the
  model wrote; one written `clean: false` that lists no issue contradicts itself and is refused (re-asked;
  recomputed, it read as a clean audit). A report built without `clean` (by code) is recomputed as before.
- `DirectScore.reward` is only used by the `direct` preset, the paper's direct-scoring baseline;
  every other preset maps structured judgments through fixed code.
- QualityCheck and SurpriseEvidence are the tools' own records, re-exported here; so are the inspection step's
  records and tool-argument schemas (`graph.inspection_schemas`: views, crop boxes, track requests,
  InspectionPlan), split out of this module (one concern each, both under 400 lines).
- An observed event whose end_frame is before its start_frame is refused (re-asked with both frames, the schema
  unchanged): it was kept as written, and assess and the audit read a timeline running backwards ("frames 20..5"),
  which the report linked as a stretch of the clip. Not swapped: which of the two frames the model got wrong is
  not known. (A track request's reversed stretch stays valid: `graph.nodes.tracking` tracks it.)
- A reply of `{}` is no Observation and no AuditReport (`EMPTY_IS_NO_ANSWER`): re-asked, in the parsing step.
- Rubric levels and the direct reward refuse a boolean (`not_boolean`; lax pydantic read `true` as 1).
- Booleans (FinalCheck's F and U, `essential`, `clean`) stay lax: pydantic reads only spellings that state the value
  ("no", "false", "0", "off", "n", 0 and their opposites; a float only when exactly 0 or 1), so what it reads is what
  the model wrote, unlike a level's `true`; anything else ("maybe", "unclear", null) is re-asked. Strict, they were
  re-asked in json_mode and function_calling (the server constrains json_schema only) for no change of meaning, and
  re-asks can end a run ineligible.
- Frame indices are `tools.sampling.FrameIndex`: an int or a whole float, never a boolean or a string
  (lax pydantic read `true` as frame 1 and "3" as frame 3); a reply that writes one is re-asked.
- The strings of a list are bounded too (`ID_CHARS`, `NAME_CHARS`, `NOTE_CHARS`, `RATIONALE_CHARS`, the limits of
  the single fields of the same kind): an observation's objects and visual issues and an audit's findings were
  unbounded, so a server's json_schema mode did not constrain them and a runaway item went into state, the
  checkpoint, the stage cache and the next stage's prompt. An item over its limit is re-asked naming the item
  and the limit. Frame indices and track coordinates keep no upper bound: code drops or clamps one outside the
  clip or frame with a note (`graph.nodes.common.split_in_clip`, `graph.nodes.evidence`), a re-ask otherwise.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, Field, model_validator

from graph import inspection_schemas
from graph.config import INSTRUCTION_CHARS_LIMIT
from graph.inspection_schemas import (
    CALLS_PER_ROUND,
    PLAN_VIEWS,
    TRACKS_PER_ROUND,
    VIEW_FRAMES,
    CropBox,
    FrameView,
    InspectionPlan,
    PlanPart,
    PlanTrack,
    PlanView,
    TrackArgs,
    TrackRequest,
    cap_view,
    crop_box,
    entry_error,
    no_nan,
)
from graph.schema_base import Record as _Record
from tools.sampling import FrameIndex

RECORD_MODULES = (__name__, inspection_schemas.__name__)
"""The modules whose pydantic records a run's state and checkpoints hold (`graph.tracing.traces_serde` allow-lists
them); every record of them is importable from this module."""

Status = Literal["met", "partial", "not_met", "unverifiable"]
RequirementKind = Literal["action", "object", "order", "outcome"]
RewardStatus = Literal["scored", "zero", "ineligible"]


def not_boolean(value: object) -> object:
    """`value`, unless it is a boolean (ValueError): lax pydantic read `true` as rubric level 1 (P or V = 0) or
    as the direct reward 1.0, a number the model never wrote; such a reply is re-asked."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got the boolean {value!r}")
    return value


Level = Annotated[int, BeforeValidator(not_boolean)]
"""A rubric level's type: an int as pydantic reads it, never a boolean (its JSON schema stays "integer")."""

ID_CHARS = 16
"""The longest requirement id: `Requirement.id`, a judgment's `requirement_id`, an id `AuditReport.missing_requirements`
names (an entry longer than every id names none: `graph.nodes.common.contract_id` reads ids up to case and spaces)."""
NAME_CHARS = 200
"""The longest object name an observation lists (a few words; the schema asks for short names)."""
NOTE_CHARS = 500
"""The longest short description: an observed event, one visual issue."""
RATIONALE_CHARS = 1000
"""The longest rationale, note or audit finding (a few sentences citing frames)."""

RequirementId = Annotated[str, Field(max_length=ID_CHARS)]
"""An audit's missing requirement id (list item)."""
ObjectName = Annotated[str, Field(max_length=NAME_CHARS)]
"""An observed object's short name (list item)."""
ShortNote = Annotated[str, Field(max_length=NOTE_CHARS)]
"""One visual issue (list item)."""
Finding = Annotated[str, Field(max_length=RATIONALE_CHARS)]
"""One audit finding: an invented condition or a contradiction (list item)."""


class ObservedEvent(_Record):
    """One thing that visibly happens in a stretch of the clip."""

    start_frame: FrameIndex = Field(ge=0, le=100_000, description="First frame index where the event is visible.")
    end_frame: FrameIndex = Field(ge=0, le=100_000, description="Last frame index where the event is visible.")
    description: str = Field(max_length=NOTE_CHARS, description="What is seen, in neutral terms (no task words).")

    @model_validator(mode="after")
    def _in_order(self) -> ObservedEvent:
        if self.end_frame < self.start_frame:  # re-asked (module docstring)
            raise ValueError(f"event {self.description[:80]!r}: its end_frame {self.end_frame} is before its "
                             f"start_frame {self.start_frame}; write its first frame as start_frame and its last "
                             "as end_frame")
        return self


class Observation(_Record):
    """Task-blind description of the clip, written before the instruction is known."""

    scene: str = Field(default="", max_length=1000, description="Scene, robot and objects present at the start.")
    events: list[ObservedEvent] = Field(default_factory=list, max_length=48,
                                        description="Timeline of visible events with frame references.")
    objects: list[ObjectName] = Field(default_factory=list, max_length=32, description="Visible objects, short names.")
    visual_issues: list[ShortNote] = Field(default_factory=list, max_length=16,
                                     description="Blur, occlusion, flicker, frozen frames, artefacts, etc.")
    summary: str = Field(default="", max_length=2000, description="Two or three sentences: what happens.")


class Requirement(_Record):
    """One checkable requirement extracted from the instruction."""

    id: str = Field(min_length=1, max_length=ID_CHARS, description="Short id, e.g. R1.")
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
    notes: str = Field(default="", max_length=RATIONALE_CHARS, description="Ambiguities in the instruction, if any.")

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

    requirement_id: str = Field(min_length=1, max_length=ID_CHARS, description="Id of the contract requirement.")
    status: Status = Field(description="met | partial | not_met | unverifiable.")
    evidence_frames: list[FrameIndex] = Field(default_factory=list, max_length=32,
                                       description="Frame indices that show the evidence.")
    rationale: str = Field(default="", max_length=RATIONALE_CHARS, description="Why, citing what the frames show.")
    confidence: float = Field(default=0.5, ge=0.0, le=1.0, description="Confidence in this status, 0..1.")


class Assessment(_Record):
    """Requirement-level judgments plus physical and visual rubric levels."""

    judgments: list[RequirementJudgment] = Field(default_factory=list, max_length=16,
                                                 description="One judgment per contract requirement.")
    physical_level: Level = Field(ge=1, le=5, description="Physical plausibility 1 (violations) .. 5 (plausible).")
    physical_rationale: str = Field(default="", max_length=RATIONALE_CHARS, description="Physical issues seen, with frames.")
    visual_level: Level = Field(ge=1, le=5, description="Visual quality 1 (unusable) .. 5 (clean).")
    visual_rationale: str = Field(default="", max_length=RATIONALE_CHARS, description="Visual issues seen, with frames.")

    @model_validator(mode="after")
    def _one_verdict_each(self) -> Assessment:
        first: dict[str, RequirementJudgment] = {}
        for j in self.judgments:
            if (prev := first.setdefault(requirement_key(j.requirement_id), j)) is not j and prev.status != j.status:
                raise ValueError(f"requirement {prev.requirement_id!r} is judged twice with different statuses "
                                 f"({prev.status}, then {j.status} as {j.requirement_id!r}): give one judgment per "
                                 "requirement")
        return self

    def judgment(self, requirement_id: str) -> RequirementJudgment | None:
        """The judgment for one requirement id, if present."""
        for j in self.judgments:
            if j.requirement_id == requirement_id:
                return j
        return None


class MotionEvidence(_Record):
    """Summary of one motion-tracking run (written by code)."""

    frames: list[FrameIndex] = Field(default_factory=list, description="Frame indices tracked.")
    points: int = Field(default=0, ge=0, description="Number of tracked points.")
    summary: str = Field(default="", max_length=4000, description="Text summary shown to the model.")


class AuditReport(_Record):
    """Scope audit of the assessment against the contract."""

    missing_requirements: list[RequirementId] = Field(default_factory=list, max_length=16,
                                                      description="Contract requirement ids without a sound judgment.")
    invented_conditions: list[Finding] = Field(default_factory=list, max_length=16,
                                               description="Conditions judged that the contract does not contain.")
    contradictions: list[Finding] = Field(default_factory=list, max_length=16,
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
    rationale: str = Field(default="", max_length=RATIONALE_CHARS, description="Why, citing frames.")
    evidence_frames: list[FrameIndex] = Field(default_factory=list, max_length=32, description="Frames relied on.")


class DirectScore(_Record):
    """Direct base-model scoring (preset `direct` only): the model writes the reward itself."""

    reward: Annotated[float, BeforeValidator(not_boolean)] = Field(
        ge=0.0, le=1.0, description="Reward in 0..1 for task completion and quality.")
    rationale: str = Field(default="", max_length=RATIONALE_CHARS, description="Why this reward.")


FaultKind = Literal["transport", "timeout", "invalid_reply", "empty_reply", "refused", "tool", "video",
                    "input", "internal", "settings"]


def escaped_surrogates(value: object) -> object:
    """A string with its lone surrogates written as escapes (``\\udcff``); anything else as it is. A clip path
    that is not UTF-8 (bytes Python reads back as lone surrogates) in a fault's message made the Fault itself
    invalid, and the run ended as "agent: ValidationError" instead of naming the clip and its problem."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


FAULT_MESSAGE_CHARS = 2000
"""The longest fault message (`fault_message` cuts one to it)."""


def fault_message(value: object) -> object:
    """A fault's message with its lone surrogates escaped (`escaped_surrogates`), then cut to `FAULT_MESSAGE_CHARS`:
    cut first (as callers do), each escape's 6 characters could take it past the limit, and building the Fault
    failed in the node's fault handling (the run ended as the agent's internal fault, not the clip's)."""
    value = escaped_surrogates(value)
    return value[:FAULT_MESSAGE_CHARS] if isinstance(value, str) else value


class Fault(_Record):
    """A failure that makes the evaluation ineligible (reward None)."""

    stage: Annotated[str, BeforeValidator(escaped_surrogates)] = Field(
        max_length=64, description="Node where the fault happened.")
    kind: Annotated[str, BeforeValidator(escaped_surrogates)] = Field(
        max_length=64, description="transport | timeout | invalid_reply | tool | video | input | ...")
    message: Annotated[str, BeforeValidator(fault_message)] = Field(max_length=FAULT_MESSAGE_CHARS,
                                                                    description="What went wrong.")

    def reason(self) -> str:
        """One-line reason for RewardResult.reasons."""
        return f"{self.stage}: {self.kind}: {self.message}"

    @property
    def outage(self) -> bool:
        """True when the machinery failed, not the clip: a kind in `OUTAGE_FAULTS`, or a video fault whose clip
        could not be reached or whose read the machine failed (`tools.video_errors.unreached` / `environmental`,
        as `raa score-batch --retry-ineligible` reads them). The clip's own problems (an undecodable video, a
        bad instruction) and the model's answers about it (refused, invalid or empty replies) are not."""
        if self.kind in OUTAGE_FAULTS:
            return True
        from tools.video_errors import environmental, unreached  # lazy: PyAV is only needed for a video fault

        return self.kind == "video" and (unreached(self.message) or environmental(self.message))


def stored_faults(value: object) -> list[Fault]:
    """The faults a stored result recorded (its ``faults``: a `raa eval reward` row's, a `raa score-batch` row's
    "result"): none for null (written before results carried them); ValueError when `value` is neither null nor a
    list of fault records (pydantic's ValidationError is one). The one reader of the field: the eval tables refuse
    what it refuses (`evals.table_rows.row_faults`), `raa score-batch --retry-ineligible` reads the reasons instead
    (`graph.batch_retry.recorded_faults`)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(f, dict) for f in value):
        raise ValueError(f"faults must be a list of objects, got {value!r}")
    return [Fault.model_validate(f) for f in value]


OUTAGE_FAULTS = ("transport", "timeout", "settings", "tool", "internal")
"""Fault kinds that say the reward machinery failed (the backbone endpoint unreachable or too slow, a setting
it cannot serve, an evidence tool or its service down, a bug), not that the clip could not be judged:
`Fault.outage`, which the reward service and the trainer count as an outage (training/rewards.py)."""


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
    server: dict[str, str] = Field(default_factory=dict, description="How the agent was fitted to its server "
                                   "(inspect_mode, coordinates: `graph.config.server_settings`); not overrides.")
    usage: dict[str, int] = Field(default_factory=dict, description="calls, images, input_tokens, output_tokens, "
                                                                    "cache_hits, attempts (requests sent).")
    trace_saved: bool = Field(default=True, description="False when the run's trace could not be saved (the "
                                                         "result stands; its last reason and note say why).")
    faults: list[Fault] = Field(default_factory=list, description="The faults that made the result ineligible "
                                                                  "(stage, kind, message); empty for a verdict.")

    @model_validator(mode="after")
    def _consistent(self) -> RewardResult:
        if self.status == "ineligible" and (self.reward is not None or not self.reasons):
            raise ValueError("an ineligible result has reward None and at least one reason")
        if self.status != "ineligible" and self.reward is None:
            raise ValueError(f"status {self.status!r} needs a reward")
        if self.status == "zero" and self.reward != 0.0:
            raise ValueError("status 'zero' needs reward 0")
        return self

    @property
    def outage(self) -> bool:
        """True when a fault of the machinery made the result ineligible (`Fault.outage`), not the clip."""
        return any(f.outage for f in self.faults)


from tools.quality import QualityCheck  # noqa: E402  (re-exported record of the quality pre-check)
from tools.surprise import SurpriseEvidence  # noqa: E402  (re-exported WMReward record)

__all__ = ["CALLS_PER_ROUND", "OUTAGE_FAULTS", "PLAN_VIEWS", "RECORD_MODULES", "TRACKS_PER_ROUND", "VIEW_FRAMES", "Assessment", "AuditReport", "CropBox",
           "DirectScore", "Fault", "FinalCheck", "FrameView", "InspectionPlan", "MotionEvidence", "Observation",
           "ObservedEvent", "PlanPart", "PlanTrack", "PlanView", "QualityCheck", "Requirement",
           "RequirementJudgment", "RewardResult", "SurpriseEvidence", "TaskContract", "TrackArgs", "TrackRequest",
           "cap_view", "crop_box", "entry_error", "no_nan", "requirement_key", "stored_faults"]
