"""policy.checkpoint.weights_missing with a pytorch ``*.bin.index.json`` beside safetensors weights: diffusers and
transformers read safetensors first (a plain file or its ``*.safetensors.index.json``), so a ``.bin`` index whose
shards were never downloaded (``--include "*.json" "*.safetensors"``) is not read and must not refuse the part.
Before: any index with a missing shard refused the part, also when the weights the loaders read were all there."""

from __future__ import annotations

import json

from policy.checkpoint import weights_missing

BIN_SHARDS = [f"pytorch_model-{i:05d}-of-00002.bin" for i in (1, 2)]
SAFE_SHARDS = [f"model-{i:05d}-of-00002.safetensors" for i in (1, 2)]


def _index(folder, name, shards):
    (folder / name).write_text(json.dumps({"metadata": {}, "weight_map": {f"w.{i}": s for i, s in enumerate(shards)}}))


def test_a_stale_bin_index_beside_a_plain_safetensors_file_is_not_missing_weights(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"x")
    _index(tmp_path, "pytorch_model.bin.index.json", BIN_SHARDS)
    assert weights_missing(tmp_path) is None


def test_a_stale_bin_index_beside_a_complete_safetensors_index_is_not_missing_weights(tmp_path):
    _index(tmp_path, "model.safetensors.index.json", SAFE_SHARDS)
    for shard in SAFE_SHARDS:
        (tmp_path / shard).write_bytes(b"x")
    _index(tmp_path, "pytorch_model.bin.index.json", BIN_SHARDS)
    assert weights_missing(tmp_path) is None


def test_an_incomplete_index_is_still_refused(tmp_path):
    _index(tmp_path, "pytorch_model.bin.index.json", BIN_SHARDS)  # nothing else: the loaders would read it
    (tmp_path / BIN_SHARDS[0]).write_bytes(b"x")
    assert "names 1 of 2 shards that are missing" in weights_missing(tmp_path)
    _index(tmp_path, "model.safetensors.index.json", SAFE_SHARDS)  # read first by diffusers, even beside a file
    (tmp_path / "model.safetensors").write_bytes(b"x")
    (tmp_path / SAFE_SHARDS[0]).write_bytes(b"x")
    assert "model.safetensors.index.json names 1 of 2" in weights_missing(tmp_path)


def test_a_broken_safetensors_index_is_refused_beside_a_complete_bin_index(tmp_path):
    """The loaders read the safetensors index before a .bin one, so the load would fail on it."""
    _index(tmp_path, "pytorch_model.bin.index.json", BIN_SHARDS)
    for shard in BIN_SHARDS:
        (tmp_path / shard).write_bytes(b"x")
    (tmp_path / "model.safetensors.index.json").write_text('{"weight_map": {"a": "mod')
    assert "model.safetensors.index.json is not a weight index" in weights_missing(tmp_path)
