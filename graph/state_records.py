"""The state's pydantic records as records again when a fork wrote them as JSON (time travel from Studio).

The nodes and routes read `graph.state.AgentState`'s record fields (assessment, contract, audits, ...) as
`graph.schemas` records. A run's own nodes write them so, but a state edit made in LangGraph Studio, or with
the LangGraph server API (`client.threads.update_state`), arrives as JSON: an edited assessment reached audit
as a plain dict and the fork ended ineligible with "audit: internal: AttributeError: 'dict' object has no
attribute 'model_dump'". `with_records` validates such dicts into their records before a node or route reads
the state (`graph.nodes.common.make_node`, `graph.routes.RouteStep`); the checkpoint keeps what was written.

Decisions where the issue was silent:
- A dict that is not a valid record (an edit with a rubric level of 42) is never scored: it is left out of the
  state the node sees and named in a problem line; a node refuses to run on it (an input fault of that node,
  before any model call), and the gate of a run without an earlier fault records it as a fault of stage
  "state" (so the result is ineligible with the reason, not scored without the record).
- The table of record fields is explicit (`RECORD_FIELDS`); `tests/test_json_forks.py` checks that it names
  every record field of AgentState.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

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

RECORD_FIELDS: dict[str, tuple[type[BaseModel], bool]] = {
    "observation": (Observation, False), "contract": (TaskContract, False), "assessment": (Assessment, False),
    "assessments": (Assessment, True), "plan": (InspectionPlan, False), "motion": (MotionEvidence, False),
    "audits": (AuditReport, True), "final_check": (FinalCheck, False), "direct": (DirectScore, False),
    "faults": (Fault, True), "result": (RewardResult, False)}
"""AgentState fields holding `graph.schemas` records: (record type, whether the field is a list of them)."""


class StateRecordError(ValueError):
    """A state field edited in a fork is not a valid record (module docstring)."""


def _problem(name: str, model: type[BaseModel], exc: ValidationError) -> str:
    detail = "; ".join(f"{'.'.join(str(x) for x in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors())
    return f"state field {name!r} is not a valid {model.__name__} (edited in a fork?): {detail}"[:600]


def _record(name: str, model: type[BaseModel], value: Any, problems: list[str]) -> Any:
    """`value` as a `model` record (None when it is not one, with a line in `problems`)."""
    if value is None or isinstance(value, model):
        return value
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        problems.append(_problem(name, model, exc))
        return None


def with_records(state: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(`state` with its record fields as records, the problems): a field that is not a valid record is left
    out (a list keeps its valid items), with one problem line each (module docstring). `state` itself is not
    changed; a state whose records are all records comes back as a copy with the same values."""
    out = dict(state)
    problems: list[str] = []
    for name, (model, many) in RECORD_FIELDS.items():
        if name not in out:
            continue
        value = out[name]
        if many and isinstance(value, list):
            items = [_record(name, model, item, problems) for item in value]
            out[name] = [item for item in items if item is not None]
        elif not many:
            record = _record(name, model, value, problems)
            if record is None and value is not None:
                del out[name]
            else:
                out[name] = record
    return out, problems


def state_faults(problems: list[str]) -> list[Fault]:
    """The faults the gate records for state records it cannot read (stage "state", kind "input")."""
    return [Fault(stage="state", kind="input", message=p) for p in problems]
