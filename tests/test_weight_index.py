"""tools/weight_index.py: the one reading of a sharded weight index behind `raa doctor` (graph.model_files) and
the training launch check (training.model_check); their own tests check the message reaches each of them."""

from __future__ import annotations

import json

import pytest

from tools.weight_index import index_shards, shards_problem


def test_the_shards_are_the_distinct_weight_map_values_sorted():
    text = json.dumps({"metadata": {"total_size": 3}, "weight_map": {"b": "s-2.safetensors", "a": "s-1.safetensors",
                                                                     "c": "s-2.safetensors"}})
    assert index_shards(text) == ["s-1.safetensors", "s-2.safetensors"]


@pytest.mark.parametrize(("text", "why"), [
    ('{"weight_map": {"a": "s-1', "not JSON"),
    ("[1, 2]", "no weight_map object"),
    ('{"metadata": {}}', "no weight_map object"),
    ('{"weight_map": ["s-1.safetensors"]}', "no weight_map object"),
    ('{"weight_map": {"a": 3}}', "not a file name"),
    ('{"weight_map": {"a": ""}}', "not a file name"),
    ('{"weight_map": {}}', "names no shard"),
])
def test_what_is_not_a_weight_index(text, why):
    with pytest.raises(ValueError, match=why):
        index_shards(text)
    problem = shards_problem("x/i.json", text, lambda shard: True)
    assert problem.startswith("x/i.json is not a weight index (") and why in problem


def test_missing_shards_are_counted_and_a_few_named():
    shards = [f"s-{i}.safetensors" for i in range(1, 7)]
    text = json.dumps({"weight_map": {f"w{i}": s for i, s in enumerate(shards)}})
    assert shards_problem("i.json", text, lambda shard: True) is None
    assert shards_problem("i.json", text, lambda shard: shard == "s-1.safetensors") == (
        "i.json names 5 of 6 shards that are missing: s-2.safetensors, s-3.safetensors, s-4.safetensors and 2 more")
    assert shards_problem("i.json", text, lambda shard: shard != "s-6.safetensors") == (
        "i.json names 1 of 6 shards that are missing: s-6.safetensors")
