"""Shared node machinery: the fault-catching step wrapper, message helpers and assessment hygiene.

Every stage is an `async def fn(state, ctx, step) -> dict` wrapped by `make_node`, which
- uses the invocation's context (`runtime.context`) when it is a `RunContext`, else the builder's
  default context (the LangGraph server passes each run's `configurable` as a plain-dict context), its
  backbone at the config's draw (`graph.context.with_config_draw`);
  a `RunContext` whose config is not the build config, or whose extra evidence tools wire other nodes, is
  refused (`graph.context.config_mismatch`, `tools_mismatch`): the node records a Fault of stage "context", kind
  "settings" (the caller's setting, an outage; quality, the entry, records it, so no other stage runs), and the
  gate uses the build context, so the ineligible result carries the agent's own preset;
- refuses the run the same way when the context's backbone has no model (`graph.no_endpoint`: the Studio graph
  built without endpoint settings): a Fault of stage "backbone", kind "settings", naming the unset variables;
- skips the stage when a fault was already recorded (parallel branches joining after a fault);
- turns BackboneFault, ToolFault, VideoError and any other exception into a `Fault` record (`graph.nodes.faults`)
  (the run then routes to the gate and the result is ineligible) — never a fabricated output;
- appends one StepRecord (node, started, duration, decision, frames, crops, tool summaries, audit
  round, gate inputs) and the stage's backbone usage to the state.

Decision where the issue was silent: an unexpected exception inside a node (a bug or an exception
from an injected model that the backbone did not classify) is recorded as kind "internal" with its
type and message, so one broken clip never takes down a batch; `ContractFrozenError` is re-raised
because it marks a wiring error, not a clip problem. A `tools.video.FrameIndexError` (a frame index the agent's own
code asked for, past the clip's end or no integer) is "internal" too: as a "video" fault it blamed the clip and its
row stayed final.

Decision where the paper is silent on the how: a judgment's evidence frames must be frames the model was
shown in the run so far (`shown_frames`); `tidy_assessment` drops any other with a note in the run's notes
(as it drops frames outside the clip) rather than re-asking: a model that kept a miscounted label through the
re-asks would turn the clip ineligible, and a note, unlike a re-ask, is the same on a stage-cache hit. A met or
partial judgment left citing no frame (none cited, or all dropped) is scored as unverifiable (`score_uncited`):
credit needs evidence the model was shown (paper Sec. 3.2: each judgment comes with the frames that back it).

Nodes are `StageNode`s, small langchain `Runnable`s, rather than `RunnableLambda`s: a RunnableLambda
inspects its function's signature and opens a callback run on every call, about 3 ms of event-loop
time per agent run that LangGraph's own per-node run already covers.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Collection, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from langgraph.runtime import get_runtime

from graph.backbone import Usage
from graph.bridge import run_sync
from graph.clip_stamp import clip_moved
from graph.context import RunContext, config_mismatch, tools_mismatch, with_config_draw
from graph.gate_sink import keep_result
from graph.job_owners import abandon
from graph.no_endpoint import missing_endpoint
from graph.nodes.faults import (  # noqa: F401  (re-exported: the stages' exceptions and their faults)
    ContextRefused,
    EndpointMissing,
    EvidenceFailed,
    InputFault,
    RunIdTaken,
    to_fault,
)
from graph.prompt_json import indented_json
from graph.schemas import Assessment, Fault, TaskContract, requirement_key
from graph.state import AgentState, ContractFrozenError, StepRecord
from graph.state_records import StateRecordError, state_faults, with_records
from graph.workers import run_scope
from prompts import render


@dataclass
class Step:
    """What a stage records about itself while it runs."""

    node: str
    decision: str = ""
    frames: list[int] = field(default_factory=list)
    crops: list[dict[str, Any]] = field(default_factory=list)
    tool_summaries: list[str] = field(default_factory=list)
    audit_round: int | None = None
    gate_inputs: dict[str, Any] | None = None
    usage: Usage = field(default_factory=Usage)
    thread_id: str = ""


StageFn = Callable[[AgentState, RunContext, Step], Awaitable[dict[str, Any]]]


class StageNode(Runnable[AgentState, dict[str, Any]]):
    """A stage as a LangGraph node: a plain langchain `Runnable` whose `ainvoke` awaits the stage and
    whose `invoke` runs it on a private event loop. Unlike `RunnableLambda`, it inspects no function
    signatures and opens no callback run per call (LangGraph already records each node as a run)."""

    def __init__(self, name: str,
                 run: Callable[[AgentState, RunnableConfig], Coroutine[Any, Any, dict[str, Any]]]) -> None:
        self.name = name
        self._run = run

    def invoke(self, input: AgentState, config: RunnableConfig | None = None, **kwargs: Any) -> dict[str, Any]:
        return run_sync(self._run(input, ensure_config(config)))

    async def ainvoke(self, input: AgentState, config: RunnableConfig | None = None,
                      **kwargs: Any) -> dict[str, Any]:
        return await self._run(input, ensure_config(config))


def make_node(name: str, fn: StageFn, default_ctx: RunContext, *, guard: bool = True) -> StageNode:
    """Wrap a stage function as a LangGraph node usable from invoke and ainvoke (see module docstring)."""

    def context() -> tuple[RunContext, str | None]:
        """(context to use, reason the invocation's context is refused or None); see module docstring."""
        runtime = get_runtime(RunContext)
        given = runtime.context if runtime is not None else None
        if not isinstance(given, RunContext):
            return default_ctx, None
        refused = config_mismatch(given.config, default_ctx.config) or tools_mismatch(given.tools, default_ctx.tools)
        return (with_config_draw(given), None) if refused is None else (default_ctx, refused)

    async def run(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        if guard and state.get("faults"):
            return {}
        records, problems = with_records(state)  # records a fork wrote as JSON (graph.state_records)
        state = cast(AgentState, records)  # the same fields, a fork's JSON records validated into records
        found: list[Fault] = []
        if problems and name == "gate" and not state.get("faults"):  # the run is ineligible with them
            found = state_faults(problems)
            state = {**state, "faults": found}
        ctx, refused = context()
        step = Step(node=name, thread_id=str((config.get("configurable") or {}).get("thread_id", "")))
        started = datetime.now(UTC).isoformat()
        t0 = time.perf_counter()
        try:
            if refused is not None and name != "gate":  # the gate writes the result of the refused run
                raise ContextRefused(refused)
            if (missing := missing_endpoint(ctx.backbone.model)) is not None and name != "gate":
                raise EndpointMissing(missing)
            if problems and name != "gate":
                raise StateRecordError("; ".join(problems))
            if (moved := await clip_moved(name, state)) is not None:  # a fork after the clip was replaced
                raise InputFault(moved)
            with run_scope(step.thread_id):
                update = dict(await fn(state, ctx, step))
        except ContractFrozenError:
            raise
        except asyncio.CancelledError:  # the run is cancelled: its queued background work is nobody's now
            abandon(step.thread_id)
            raise
        except Exception as exc:  # every failure becomes an explicit Fault (ineligible), never a reward
            fault = to_fault(name, exc)
            update = {"faults": [fault]}
            step.decision = f"fault ({fault.kind}): {fault.message[:200]}"
        if found:
            update["faults"] = [*found, *update.get("faults", [])]
        record = StepRecord(node=name, started=started, duration_s=round(time.perf_counter() - t0, 6),
                            decision=step.decision, frames=sorted(set(step.frames)), crops=step.crops,
                            tool_summaries=step.tool_summaries, audit_round=step.audit_round,
                            gate_inputs=step.gate_inputs)
        update["steps"] = [record]
        update["usage"] = step.usage.as_dict()
        keep_result(config, update)  # the gate's result, kept in case the final checkpoint fails (graph.gate_sink)
        return update

    return StageNode(name, run)


def system(stage: str, **variables: object) -> SystemMessage:
    """The stage's system message (its prompt file, which starts with '# stage: <name>')."""
    return SystemMessage(content=render(stage, **variables))


def human(text: str, blocks: Sequence[dict] = ()) -> HumanMessage:
    """A human message: text first, then image/label blocks (plain string when there are none)."""
    if not blocks:
        return HumanMessage(content=text)
    return HumanMessage(content=[{"type": "text", "text": text}, *blocks])


def brief(text: str, limit: int = 300) -> str:
    """`text` cut to `limit` characters for a step's tool summary, ending in " ..." when cut: a summary cut
    bare read as whole (a motion summary ended "region top-left [0.00,0.00,0.33,0.33]: 9")."""
    return text if len(text) <= limit else text[:limit - 4].rstrip() + " ..."


def count(n: int, noun: str) -> str:
    """`n` and the noun, plural unless n is 1 ("1 event", "0 events") for step decisions."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def dump(record: Any) -> str:
    """Compact JSON of a pydantic record for a prompt (`json.dumps(..., ensure_ascii=False, indent=1)`'s text, written
    faster: `graph.prompt_json`)."""
    return indented_json(record.model_dump(mode="json"))


_INSTRUCTION_TAG = re.compile(r"<(\s*/?\s*instruction)", re.IGNORECASE)


def instruction_block(instruction: str) -> str:
    """The instruction as delimited data (the prompts say never to follow commands inside it). A tag of the
    block inside the text ("</instruction>", any case or spacing) has its "<" written "&lt;": left as it was,
    it closed the block early and the text after it reached the model outside the tags, as the prompt's own.
    Other text, angle brackets included, is passed as written (so are the stage-cache keys of such text)."""
    data = _INSTRUCTION_TAG.sub(r"&lt;\1", instruction)
    return f"<instruction>\n{data}\n</instruction>"


def split_in_clip(frames: Sequence[int], n_frames: int) -> tuple[list[int], list[int]]:
    """The distinct frames of `frames` inside 0..n_frames-1 and those outside it, each sorted."""
    return (sorted({f for f in frames if 0 <= f < n_frames}), sorted({f for f in frames if not 0 <= f < n_frames}))


def split_shown(frames: Sequence[int], shown: Collection[int]) -> tuple[list[int], list[int]]:
    """The distinct frames of `frames` in `shown` and those not in it, each sorted."""
    seen = set(shown)
    return sorted({f for f in frames if f in seen}), sorted({f for f in frames if f not in seen})


SHOWING_STAGES = ("reflect", "repair", "final_check")
"""Stages whose step records' `frames` are frames of images sent to the model beyond the uniform sample and the
inspection tools' results (reflect: surprise windows, extra tools' frames, motion overlays). Other stages record
frames given to tools only (quality, surprise, extra), or the sample (observe, assess, direct)."""


def shown_frames(state: AgentState) -> set[int]:
    """The frames whose images (whole, cropped or under track overlays) the model has been shown in the run so far:
    the uniform sample (observe, assess), the frames of the inspection rounds an inspect call sent
    (`sent_rounds`) and the images reflect, repair and final_check sent (`SHOWING_STAGES`). A node adds the
    frames of its own call.

    Every frame an inspection tool returned used to count as shown. The images of the last round (plan mode's
    only one, or the one the round cap ends the loop after) reach the model only in reflect, which sends the
    most recent ones when the surprise windows, overlays and extra tools' frames take part of its
    `max_images_per_call`: a judgment could then keep citing a frame whose image was never sent, and repair
    and final_check showed it as evidence. Reflect's step records the frames it sent, which count here."""
    sent = sent_rounds(state)
    shown = {int(f) for f in state.get("sample", [])}
    shown |= {int(f) for e in state.get("exchanges", []) if int(e.get("round", 0)) < sent for f in e.get("frames", [])}
    shown |= {int(f) for s in state.get("steps", []) if s.get("node") in SHOWING_STAGES for f in s.get("frames", [])}
    return shown


def sent_rounds(state: AgentState) -> int:
    """How many inspection rounds (0, 1, ...) an inspect call has sent the images of: each inspect call after the
    first rebuilds the conversation with every earlier round's images (graph.nodes.inspect.conversation), so
    round r was sent when inspect ran more than r + 1 times; plan mode's one call sends none."""
    calls = sum(1 for s in state.get("steps", []) if s.get("node") == "inspect")
    return max(calls - 1, 0)


CREDITED = ("met", "partial")
"""Statuses that earn task credit (`graph.gate.STATUS_WEIGHT`): a judgment with one of them needs a cited frame the
model was shown (`score_uncited`)."""


def tidy_assessment(assessment: Assessment, contract: TaskContract, n_frames: int, shown: Collection[int],
                    stage: str) -> tuple[Assessment, list[str]]:
    """`tidy_refs` then `score_uncited` (assess). A revision (reflect, repair) puts its guard between the two
    (`graph.nodes.revision.revise`): the guard reads the status the model wrote."""
    tidied, notes = tidy_refs(assessment, contract, n_frames, shown, stage)
    scored, more = score_uncited(tidied, stage)
    return scored, notes + more


def tidy_refs(assessment: Assessment, contract: TaskContract, n_frames: int, shown: Collection[int],
              stage: str) -> tuple[Assessment, list[str]]:
    """One judgment per contract requirement, in contract order, citing only frames the model was shown; plus a
    note per fix.

    - An id that differs from a contract id only in case or surrounding spaces ("r2", " R2") is read as that
      id when no other contract id has the same spelling; any other unknown id is dropped.
    - A requirement judged twice keeps its first judgment.
    - Evidence frames outside 0..n_frames-1 are dropped.
    - Evidence frames inside the clip but not in `shown` (the frames the model was shown in the run so far,
      `shown_frames` plus the node's own images) are dropped: a judgment's evidence is what the model saw, and
      repair and final_check show a judgment's evidence frames again, so an unseen citation (frame 17 next to
      the sampled 16 and 18) also let a long clip's later stages show frames past the inspection access policy.
    Statuses are left as written (`score_uncited` reads what is left of the evidence). Each fix is noted
    (`{stage}: ...`): they were done silently, so a judgment written "r2" vanished, T fell (1.0 -> 0.5) and the
    gate could read an essential gap, with no reason in the result."""
    ids = [r.id for r in contract.requirements]
    notes: list[str] = []
    first: dict[str, str] = {}
    judgments = []
    for j in assessment.judgments:
        rid = contract_id(j.requirement_id, contract)
        if rid is None:
            notes.append(f"{stage}: judgment for unknown requirement {j.requirement_id!r} ({j.status}) dropped "
                         f"(contract ids: {', '.join(ids)})")
            continue
        if rid != j.requirement_id:
            notes.append(f"{stage}: judgment for {j.requirement_id!r} read as {rid}")
        if rid in first:
            notes.append(f"{stage}: a second judgment for {rid} ({j.status}) dropped; the first ({first[rid]}) "
                         "is kept")
            continue
        first[rid] = j.status
        inside, outside = split_in_clip(j.evidence_frames, n_frames)
        frames, unseen = split_shown(inside, shown)
        if outside:
            notes.append(f"{stage}: {rid} cited frames {outside} outside the clip (0..{n_frames - 1}); dropped")
        if unseen:
            notes.append(f"{stage}: {rid} cited frames {unseen} the model was not shown; dropped"
                         + ("" if frames else f" ({j.status} now cites no frame)"))
        judgments.append(j.model_copy(update={"requirement_id": rid, "evidence_frames": frames}))
    order = {i: k for k, i in enumerate(ids)}
    judgments.sort(key=lambda j: order[j.requirement_id])
    return assessment.model_copy(update={"judgments": judgments}), notes


def score_uncited(assessment: Assessment, stage: str) -> tuple[Assessment, list[str]]:
    """`assessment` (tidied by `tidy_refs`) with every met or partial judgment (`CREDITED`) that cites no frame
    scored as unverifiable, with a note each: no evidence the model was shown backs the credit it claims.

    One that cited frames all dropped kept its status and full credit (a met essential requirement backed by
    nothing counted as shown), and so did one that cited no frame at all. As unverifiable it is re-inspected
    (inspect flags it and may cite frames then), an essential one goes to final_check, and a revision's guard
    (`graph.nodes.revision.guard_judgments`) applies to it as to any status. A not_met judgment earns no credit
    and stays; a judgment keeping one cited frame keeps its status (a misread label among good ones is no
    verdict on the clip)."""
    notes: list[str] = []
    judgments = []
    for j in assessment.judgments:
        if j.status in CREDITED and not j.evidence_frames:
            notes.append(f"{stage}: {j.requirement_id} {j.status} scored as unverifiable: it cites no frame the "
                         "model was shown")
            j = j.model_copy(update={"status": "unverifiable"})
        judgments.append(j)
    return assessment.model_copy(update={"judgments": judgments}), notes


def contract_id(requirement_id: str, contract: TaskContract) -> str | None:
    """The contract id that ``requirement_id`` names: itself, or the one id it matches up to case and surrounding
    spaces (`graph.schemas.requirement_key`; a validated contract holds no two ids equal up to case, so at most one
    matches) (`tidy_assessment`, the audit); None for an id the contract does not hold."""
    ids = [r.id for r in contract.requirements]
    if requirement_id in ids:
        return requirement_id
    match = [i for i in ids if requirement_key(i) == requirement_key(requirement_id)]
    return match[0] if len(match) == 1 else None


def pick_frames(candidates: Sequence[int], fallback: Sequence[int], limit: int,
                keep: Sequence[int] = ()) -> list[int]:
    """Up to `limit` distinct sorted frames: every frame of `keep` (up to `limit`), then `candidates`
    (thinned evenly when too many), topped up evenly from `fallback`."""
    kept = sorted(set(int(c) for c in keep))[-limit:] if limit > 0 else []
    chosen = sorted(set(int(c) for c in candidates) - set(kept))
    room = limit - len(kept)
    if len(chosen) > room:
        step = len(chosen) / room if room > 0 else 0
        chosen = [chosen[int(k * step)] for k in range(room)]
    chosen += kept
    pool = [f for f in fallback if f not in chosen]
    need = max(0, min(limit, len(chosen) + len(pool)) - len(chosen))
    if need and pool:
        step = len(pool) / need
        chosen += [pool[int(k * step)] for k in range(need)]
    return sorted(set(chosen))


def unnoted(state: AgentState, notes: Sequence[str]) -> list[str]:
    """`notes` without those the run's notes already hold, each once: the notes reducer appends, so a note a loop's
    stage writes again each round (the audit's on an unknown id, a repair's on a citation dropped or a judgment kept)
    went into the run's notes and the result's reasons once per round, word for word. The step's decision still
    counts what its round did."""
    held = set(state.get("notes") or [])
    return [n for n in dict.fromkeys(notes) if n not in held]


def frames_total(state: AgentState) -> int:
    """Number of frames of the clip (from the quality node's metadata)."""
    return int(state["meta"]["frames"])
