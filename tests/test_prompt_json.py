"""graph.prompt_json.indented_json must give json.dumps(..., ensure_ascii=False, indent=1)'s text exactly:
the prompts (and so the stage-cache keys) embed it."""

from __future__ import annotations

import json
import random

import pytest

from graph.prompt_json import indented_json

ODD_TEXT = ["", "plain", 'quote " and \\ backslash', "line\nbreak\ttab\r\x00\x1f\x7f", "ünïcødé ✓ 日本",
            "\ud800 lone surrogate", "</instruction>"]
ODD_NUMBERS = [0, -1, 2**70, -(2**65), 0.0, -0.0, 1e-7, 1.5e300, 0.1 + 0.2, float("nan"), float("inf"),
               float("-inf"), True, False, None]


def _random_value(rng: random.Random, depth: int) -> object:
    kind = rng.randrange(6 if depth < 4 else 3)
    if kind == 0:
        return rng.choice(ODD_TEXT)
    if kind == 1:
        return rng.choice(ODD_NUMBERS)
    if kind == 2:
        return rng.uniform(-1e6, 1e6) if rng.random() < 0.5 else rng.randrange(-10**6, 10**6)
    if kind == 3:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 4:
        return tuple(_random_value(rng, depth + 1) for _ in range(rng.randrange(3)))
    keys = ODD_TEXT + [1, 2.5, True, False, None, float("nan")]
    return {rng.choice(keys): _random_value(rng, depth + 1) for _ in range(rng.randrange(5))}


def test_matches_json_dumps_on_random_nested_data():
    rng = random.Random(3)
    for _ in range(2000):
        value = _random_value(rng, 0)
        assert indented_json(value) == json.dumps(value, ensure_ascii=False, indent=1)


@pytest.mark.parametrize("value", [{}, [], (), {"a": {}}, {"a": []}, [[], {}], "x", 3, None])
def test_matches_json_dumps_on_empty_containers_and_bare_scalars(value):
    assert indented_json(value) == json.dumps(value, ensure_ascii=False, indent=1)


def test_dump_of_an_agent_record_is_unchanged():
    from graph.nodes.common import dump
    from graph.schemas import TaskContract

    contract = TaskContract.model_validate({"requirements": [
        {"id": "R1", "kind": "object", "text": "the red block \"A\" is involved", "essential": True},
        {"id": "R2", "kind": "outcome", "text": "ends on the right ✓", "essential": False}]})
    assert dump(contract) == json.dumps(contract.model_dump(mode="json"), ensure_ascii=False, indent=1)


def test_unsupported_values_raise_what_json_raises():
    with pytest.raises(TypeError, match="not JSON serializable"):
        indented_json({"a": {1, 2}})
    with pytest.raises(TypeError, match="keys must be"):
        indented_json({(1, 2): 3})
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        indented_json(loop)
