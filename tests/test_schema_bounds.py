"""Every field a model writes is described and bounded (DESIGN.md §3 "State and schemas"): strings by maxLength
(or an enum), lists by maxItems, list items too; an over-long reply is re-asked, naming the field and its limit."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from openai.lib._pydantic import to_strict_json_schema
from pydantic import BaseModel, ValidationError

from evals.judge import JudgeReply
from evals.vqa import VQAAnswer
from graph.backbone import Backbone, Usage
from graph.doctor import ColourProbe
from graph.nodes.evidence import track_motion, view_crop, view_frames
from graph.schemas import (
    Assessment,
    AuditReport,
    DirectScore,
    FinalCheck,
    InspectionPlan,
    Observation,
    TaskContract,
)
from graph.testing import ScriptedChatModel

LLM_OUTPUTS: list[type[BaseModel]] = [Observation, TaskContract, Assessment, InspectionPlan, AuditReport, FinalCheck,
                                      DirectScore, JudgeReply, VQAAnswer, ColourProbe, view_frames, view_crop,
                                      track_motion]
"""Every record a model writes: structured stage outputs, the judge's and VQA's replies, doctor's probe, and the
inspect tools' arguments."""

UNBOUNDED_NUMBERS = {"start_frame", "end_frame", "evidence_frames", "frames", "frame", "points", "box"}
"""Numbers left without an upper bound on purpose: frame indices outside the clip are dropped or clamped with a note
(`graph.nodes.common.split_in_clip`, `graph.nodes.tracking`), coordinates outside the frame moved to its edge and a
box that is not valid shown as the full frame (`graph.nodes.evidence`); refused by the schema, each was a re-ask
(and the tool specs' and plan's schemas are pinned: stage-cache keys hash them)."""
UNBOUNDED_LISTS = {"points[]"}
"""Lists left without maxItems on purpose: one track point, whose numbers past [x, y] leave that point out with a
note (`graph.nodes.evidence.track_points`; the points list itself is bounded)."""


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = defs[node["$ref"].rsplit("/", 1)[1]]
    return node


def _unbounded(node: dict[str, Any], defs: dict[str, Any], where: str, field: str, out: list[str],
               seen: set[str]) -> None:
    """Append to `out` each place under `node` that a model can make as long (or as large) as it likes."""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[1]
        if name not in seen:
            _check_object(defs[name], defs, name, out, seen | {name})
        return
    for option in node.get("anyOf", []):
        _unbounded(option, defs, where, field, out, seen)
    kind = node.get("type")
    if kind == "string" and "maxLength" not in node and "enum" not in node and "const" not in node:
        out.append(f"{where}: string without maxLength")
    if kind == "array":
        if "maxItems" not in node and not where.endswith(tuple(UNBOUNDED_LISTS)):
            out.append(f"{where}: array without maxItems")
        _unbounded(node.get("items", {}), defs, f"{where}[]", field, out, seen)
    if kind in ("integer", "number") and field not in UNBOUNDED_NUMBERS and not (
            {"maximum", "exclusiveMaximum"} & set(node) and {"minimum", "exclusiveMinimum"} & set(node)):
        out.append(f"{where}: number without a range")


def _check_object(schema: dict[str, Any], defs: dict[str, Any], name: str, out: list[str], seen: set[str]) -> None:
    for field, prop in schema.get("properties", {}).items():
        where = f"{name}.{field}"
        if not (prop.get("description") or _resolve(prop, defs).get("description")):
            out.append(f"{where}: no description")
        _unbounded(prop, defs, where, field, out, seen)


@pytest.mark.parametrize("model", LLM_OUTPUTS, ids=lambda m: m.__name__)
def test_every_model_written_field_is_described_and_bounded(model: type[BaseModel]) -> None:
    schema = model.model_json_schema()
    problems: list[str] = []
    _check_object(schema, schema.get("$defs", {}), model.__name__, problems, {model.__name__})
    assert problems == []


@pytest.mark.parametrize("model", LLM_OUTPUTS, ids=lambda m: m.__name__)
def test_the_schemas_stay_valid_for_strict_structured_outputs(model: type[BaseModel]) -> None:
    # the openai SDK makes the schema strict for json_schema (`chat.completions.parse`): it must convert, every
    # object closed and all its properties required, and the bounds must survive the conversion
    strict = to_strict_json_schema(model)
    objects = [strict, *strict.get("$defs", {}).values()]
    for obj in objects:
        if obj.get("type") == "object":
            assert obj["additionalProperties"] is False
            assert sorted(obj["required"]) == sorted(obj["properties"])
    problems: list[str] = []
    _check_object(strict, strict.get("$defs", {}), model.__name__, problems, {model.__name__})
    assert problems == []


@pytest.mark.parametrize(("model", "data"), [
    (Observation, {"objects": ["cup " * 200]}),
    (Observation, {"visual_issues": ["blur " * 400]}),
    (AuditReport, {"missing_requirements": ["R1 " + "x" * 100]}),
    (AuditReport, {"invented_conditions": ["speed " * 400]}),
    (AuditReport, {"contradictions": ["frame 3 " * 400]}),
])
def test_an_over_long_list_item_is_refused(model: type[BaseModel], data: dict) -> None:
    with pytest.raises(ValidationError, match="at most"):
        model.model_validate_json(json.dumps(data))


def test_items_of_real_length_still_read() -> None:
    obs = Observation.model_validate({"objects": ["red cup", "wooden table", "robot gripper"],
                                      "visual_issues": ["motion blur on the gripper in frames 12-18, so the moment "
                                                        "of the grasp is hard to see"]})
    assert len(obs.objects) == 3
    report = AuditReport.model_validate({"missing_requirements": ["R2", " r3 "], "contradictions": [
        "R1 is judged met citing frame 40, but the observation says the cup falls off the gripper at frame 38 and "
        "lies on the table in every later frame"]})
    assert not report.clean


def test_an_over_long_audit_finding_is_re_asked_in_json_mode() -> None:
    bad = {"missing_requirements": [], "invented_conditions": [], "contradictions": ["frames " * 2000]}
    good = {"missing_requirements": [], "invented_conditions": [], "contradictions": ["R1 cites frame 9, which shows "
                                                                                      "no cup"]}
    model = ScriptedChatModel({"audit": [bad, good]})
    bb = Backbone(model, method="json_mode", retry_wait=(0.0, 0.0))
    usage = Usage()
    msgs = [SystemMessage(content="# stage: audit\nAudit."), HumanMessage(content="contract and assessment")]
    out = asyncio.run(bb.astructured("audit", AuditReport, msgs, usage))
    assert out.contradictions == good["contradictions"] and usage.calls == 2
    reask = model.calls[1].messages[-1].text
    assert "contradictions.0" in reask and "at most" in reask and len(reask) < 2000
