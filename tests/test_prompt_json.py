"""graph.prompt_json.indented_json writes exactly what json.dumps(..., ensure_ascii=False, indent=1) writes (the
prompts' record dumps, graph.nodes.common.dump), for the records the prompts show and for odd values."""

from __future__ import annotations

import enum
import json
import random

import pytest

from graph.nodes.common import dump
from graph.prompt_json import indented_json
from graph.schemas import Assessment, Observation, TaskContract


def _reference(value):
    return json.dumps(value, ensure_ascii=False, indent=1)


class _Level(enum.IntEnum):
    HIGH = 5


class _Word(enum.StrEnum):
    MET = "met"


ODD = [
    {}, [], "", 0, -0.0, 1e-05, 1e300, 0.1 + 0.2, float("nan"), float("inf"), float("-inf"), 2**70, True, None,
    {"a": [], "b": {}, "c": [[]], "d": [{}]}, ("t", 1), {"é": "ü\n\t\"\\ \u2028 \x00 \x1f \ud800 😀"},
    {"k": _Level.HIGH, "w": _Word.MET, "f": [1.0, 2.5]},
    {3: "int key", 2.5: "float key", False: "bool key", None: "none key"},  # json.dumps turns these into strings
    {"nested": {"deep": [1, {"x": [None, False, "s"]}]}},
]


@pytest.mark.parametrize("value", ODD, ids=range(len(ODD)))
def test_odd_values_as_json_dumps_writes_them(value):
    assert indented_json(value) == _reference(value)


def test_a_value_json_dumps_refuses_is_refused_alike():
    with pytest.raises(TypeError):
        indented_json({"x": object()})


def _random(rng: random.Random, depth: int):
    kinds = ["str", "int", "float", "bool", "none"] + (["list", "dict"] * 2 if depth < 4 else [])
    kind = rng.choice(kinds)
    if kind == "str":
        return "".join(rng.choice("ab \n\"\\é\u0001😀") for _ in range(rng.randrange(6)))
    if kind == "int":
        return rng.randrange(-10**6, 10**6)
    if kind == "float":
        return rng.choice([rng.uniform(-1e3, 1e3), rng.random() * 1e-7, float(rng.randrange(100))])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "none":
        return None
    if kind == "list":
        return [_random(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {f"k{i}{rng.choice('xé ')}": _random(rng, depth + 1) for i in range(rng.randrange(4))}


def test_random_values_as_json_dumps_writes_them():
    rng = random.Random(7)
    for _ in range(500):
        value = _random(rng, 0)
        assert indented_json(value) == _reference(value)


def test_the_prompts_records_are_dumped_as_before():
    contract = TaskContract.model_validate({"requirements": [
        {"id": "R1", "kind": "object", "text": "the red \"block\" é", "essential": True},
        {"id": "R2", "kind": "outcome", "text": "it ends on the right\nside", "essential": False}]})
    observation = Observation.model_validate({
        "scene": "a table", "events": [{"start_frame": 0, "end_frame": 32, "description": "slides"}],
        "objects": ["red block"], "visual_issues": [], "summary": "A block moves."})
    assessment = Assessment.model_validate({
        "judgments": [{"requirement_id": "R1", "status": "met", "evidence_frames": [0, 16], "rationale": "seen",
                       "confidence": 0.9}, {"requirement_id": "R2", "status": "partial", "evidence_frames": [],
                                            "rationale": "", "confidence": 0.25}],
        "physical_level": 5, "physical_rationale": "ok", "visual_level": 4, "visual_rationale": "ok"})
    for record in (contract, observation, assessment):
        assert dump(record) == _reference(record.model_dump(mode="json"))
