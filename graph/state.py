"""Typed state of the reward agent (DESIGN.md §3 "State and schemas").

The state holds references and small records only: the video path, frame indices, crop boxes and
pydantic records. Decoded frames, models, the chat model and tool clients live in the run context
(`graph.context.RunContext`), so a checkpoint stays small.

Reducers: `steps`, `faults`, `notes`, `assessments`, `audits` and `exchanges` are append-only;
`usage` sums counters; `contract` is frozen (written once; a second write, an `Overwrite` in a time-travel
fork too, raises `ContractFrozenError`). Other fields are last-value channels written by one node per step.

Decisions where the issue was silent:
- `steps[i]["started"]` is a UTC ISO-8601 timestamp string; `duration_s` is wall seconds.
- TypedDicts come from typing_extensions: pydantic (and with it LangGraph's input/output JSON schemas,
  which Studio's input form and `langgraph dev`'s /schemas use) rejects `typing.TypedDict` before 3.12.
- `AgentInput` is the graph's input schema: a run starts from `video`, `instruction` and optionally
  `run_id`; any other input key is ignored (the nodes write the rest).
- Inspection evidence is kept as `exchanges` (tool calls with their arguments and results as
  references and text); the inspect node rebuilds the conversation (images included) from them and
  the frame cache in the run context, so no image bytes enter the checkpoint.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Annotated, Any, NotRequired

from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.types import Overwrite
from typing_extensions import TypedDict

from graph.schemas import (
    Assessment,
    AuditReport,
    DirectScore,
    Fault,
    FinalCheck,
    InspectionPlan,
    MotionEvidence,
    Observation,
    RewardResult,
    TaskContract,
)


class ContractFrozenError(RuntimeError):
    """The task contract was written a second time (it is frozen once extracted)."""


def write_once(old: TaskContract | None, new: TaskContract | None) -> TaskContract | None:
    """Reducer of the frozen contract: the first write sets it, any later write raises."""
    if old is not None and new is not None:
        raise ContractFrozenError("the task contract is frozen: it was already written once")
    return old if new is None else new


OVERWRITE = "__overwrite__"
"""The key of `Overwrite`'s JSON forms (langgraph.channels.binop)."""


def _unwrapped(value: Any) -> Any:
    """A write with LangGraph's `Overwrite` (typed, or its JSON forms from the LangGraph server) taken off."""
    if isinstance(value, Overwrite):
        return value.value
    if isinstance(value, dict):
        if len(value) == 1 and OVERWRITE in value:
            return value[OVERWRITE]
        if value.get("type") == OVERWRITE and "value" in value:
            return value["value"]
    return value


class FrozenValue(BinaryOperatorAggregate):
    """The contract's channel: every write goes through `write_once`, an `Overwrite` too. LangGraph applies an
    Overwrite without the reducer, so a time-travel fork (`update_state`, Studio) replaced the frozen contract
    after assess had judged the old one; and a first write wrapped in one was stored as the wrapper."""

    def __init__(self, typ: Any = None, operator: Any = write_once) -> None:
        super().__init__(typ, operator)

    def update(self, values: Sequence[Any]) -> bool:
        return super().update([_unwrapped(v) for v in values])  # each write then goes through write_once


def add_usage(old: dict[str, int] | None, new: dict[str, int] | None) -> dict[str, int]:
    """Reducer summing usage counters (calls, images, input_tokens, output_tokens, cache_hits, attempts)."""
    out = dict(old or {})
    for key, value in (new or {}).items():
        out[key] = out.get(key, 0) + int(value)
    return out


class StepRecord(TypedDict, total=False):
    """One node execution, appended to `steps` for tracing (`raa trace RUN_ID`)."""

    node: str
    """Node name (quality, observe, contract, assess, inspect, tool_call, reflect, audit, repair, ...)."""
    started: str
    """UTC ISO-8601 start time."""
    duration_s: float
    """Wall seconds the node took."""
    decision: str
    """What the node decided, in one line (e.g. "3 requirements", "route: repair", "R = 0.62")."""
    frames: list[int]
    """Frame indices the node sent to the model or the tools."""
    crops: list[dict[str, Any]]
    """Crops used: {"frame", "box", "fallback", "reason", "requested"} (requested: the box asked for, when it fell back)."""
    tool_summaries: list[str]
    """One line per tool call executed (tool_call / plan / reflect)."""
    audit_round: int | None
    """Repair round this audit/repair step belongs to (0 = first audit)."""
    gate_inputs: dict[str, Any] | None
    """Gate node only: eligible, failure, unverifiable, T, P, V, reward."""


class ToolExchange(TypedDict, total=False):
    """One executed tool call of the inspection loop, stored as references (no pixels)."""

    round: int
    """Inspect round (0-based) whose tool call this answers."""
    call_id: str
    """Tool-call id from the model's message (plan mode: synthetic)."""
    name: str
    """view_frames | view_crop | track_motion."""
    args: dict[str, Any]
    """Arguments as run, not as the model wrote them (`graph.nodes.evidence.call_args`): a view's frames cut to 16,
    keys the tool does not take left out, oversized values cut; as read by the tool's schema when it ran (a call not
    run: as written, bounded). They go back to the model each round, to reflect and into the trace, so a call of
    3,000 frames or a 1 MB string stays small."""
    frames: list[int]
    """Frames actually shown (after the access policy and the budget)."""
    box: list[float] | None
    """Crop box actually used (None = full frame)."""
    overlay: bool
    """True when the images are motion-track overlays."""
    points: list[list[float]]
    """track_motion: the points tracked, as fractions of the frame (converted from `AgentConfig.coordinates`,
    clamped to the frame, points not [x, y] left out; empty = grid). The overlays are replayed from these:
    replayed from the raw `args`, per_mille / pixel points or points off the frame failed the tracker."""
    query_frame: int
    """track_motion: the clip frame the points lie on (start_frame clamped to the clip)."""
    text: str
    """Tool result text returned to the model (notes on fallbacks, budget, track summary)."""


class AgentInput(TypedDict):
    """What a run starts from (the graph's input schema)."""

    video: str
    """Path of the clip to score (mp4 or anything PyAV decodes)."""
    instruction: str
    """Task instruction the clip is judged against."""
    run_id: NotRequired[str]
    """Run id to record in the result (the API sets it to the checkpoint thread id)."""


class AgentState(TypedDict, total=False):
    """State of one reward-agent run. Input keys: `video`, `instruction` (optionally `run_id`)."""

    video: str
    """Path of the clip (a reference; frames are decoded into the run context's cache)."""
    instruction: str
    """Task instruction as given (never shown to the observe stage)."""
    run_id: str
    """Run id (equals the checkpoint thread id when set by the API)."""
    preset: str
    """Preset label of the config the graph was built with."""
    switches: dict[str, bool]
    """Module switches the graph was built with (the preset's, with any explicit overrides such as
    `AgentConfig(preset="full", audit=False)`), so a report can tell an override from the preset."""
    overrides: dict[str, Any]
    """The settings that differ from the preset's (`graph.config.config_overrides`; empty for the plain preset):
    switches and caps, so two runs labelled with one preset can be told apart."""
    caps: dict[str, int]
    """Every cap of the config the run started under, at its value (`graph.config.run_caps`; a resume is judged by
    them, not by the overrides, which a later version's defaults would read otherwise)."""
    server: dict[str, str]
    """How the agent was fitted to its server (`graph.config.server_settings`: inspect_mode, coordinates)."""
    draw: int
    """The stage-cache draw the run takes (`AgentConfig.draw`)."""
    extra_tools: list[str]
    """Names of the agent's extra evidence tools (`tools.extra`; empty without), in order, which wire its extra node
    (and order their reports in reflect's prompt)."""
    backbone: dict[str, Any]
    """The backbone settings that shape the run's answers (`graph.context.backbone_settings`: model, the model an
    OpenAI-family model asks for, structured-output method, temperature, completion-token limit, the images' long side and
    JPEG quality); a resume under others is refused."""
    meta: dict[str, Any]
    """Video metadata: frames, fps, width, height (upright), duration, rotation (display quarter turns)."""
    sample: list[int]
    """Uniformly sampled frame indices used by observe / assess (observe_frames of them)."""
    quality: dict[str, Any]
    """QualityCheck of the sampled frames (as a dict)."""
    zero: bool
    """True when the quality check assigns reward 0 (uniform or unusable content)."""
    observation: Observation
    """Task-blind observation (no instruction seen)."""
    contract: Annotated[TaskContract | None, FrozenValue(TaskContract | None, write_once)]
    """Frozen task contract."""
    assessment: Assessment
    """Current assessment (assess, then reflect / repair revise it)."""
    assessments: Annotated[list[Assessment], operator.add]
    """History of assessments, one per writing node."""
    exchanges: Annotated[list[ToolExchange], operator.add]
    """Executed inspection tool calls (references + text)."""
    pending_calls: list[dict[str, Any]]
    """Tool calls of the last inspect message still to execute: {"id", "name", "args"}, ids unique, at most
    `graph.schemas.CALLS_PER_ROUND`; the last has "left_out" (how many later calls were left out) when any were
    (`graph.nodes.inspect.round_calls`). Their args are bounded as run, with "cut" (the note on what was cut) when
    anything was (`graph.nodes.tool_args`)."""
    inspect_rounds: int
    """Inspect rounds done."""
    inspect_notes: str
    """The inspector's closing message (text), if any."""
    plan: InspectionPlan | None
    """Inspection plan (inspect_mode='plan')."""
    motion: MotionEvidence | None
    """Automatic motion evidence (motion on, inspection off)."""
    surprise: dict[str, Any] | None
    """WMReward SurpriseEvidence (as a dict)."""
    extra_evidence: list[dict[str, Any]] | None
    """Reports of the extra evidence tools (`tools.extra`): {"tool", "summary", "frames", "values"} each."""
    audits: Annotated[list[AuditReport], operator.add]
    """Audit reports, one per audit round."""
    repair_rounds: int
    """Repair rounds done (<= 3)."""
    final_check: FinalCheck | None
    """Final check (failure gate presets)."""
    direct: DirectScore | None
    """Direct score (preset direct)."""
    faults: Annotated[list[Fault], operator.add]
    """Faults; any fault makes the result ineligible."""
    notes: Annotated[list[str], operator.add]
    """Notes for the result's reasons (e.g. instruction truncated, judgment kept after repair)."""
    usage: Annotated[dict[str, int], add_usage]
    """Backbone usage counters summed over nodes."""
    steps: Annotated[list[StepRecord], operator.add]
    """Append-only trace of node executions."""
    result: RewardResult
    """Final result (written by the gate node)."""
