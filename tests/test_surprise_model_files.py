"""The surprise loader names what a local V-JEPA 2 folder lacks (config.json, the weights, a shard of an index)
before transformers is asked: without config.json transformers built the default (ViT-L) config and failed on
the first weight of another size ("You set `ignore_mismatched_sizes` to `False`"), never naming the file."""

from __future__ import annotations

import json

import pytest

from tests.vjepa_files import save_tiny_vjepa
from tools.errors import ToolFault
from tools.surprise import VJEPA2SurpriseScorer


def _load_fault(folder) -> str:
    with pytest.raises(ToolFault) as info:
        VJEPA2SurpriseScorer.from_pretrained(str(folder)).load()
    assert info.value.tool == "surprise" and info.value.kind == "load"
    return info.value.message


def test_a_folder_without_config_json_names_it(tmp_path):
    folder = save_tiny_vjepa(tmp_path / "vjepa2")
    (folder / "config.json").unlink()
    message = _load_fault(folder)
    assert "config.json" in message and "ignore_mismatched_sizes" not in message


def test_a_folder_without_weights_names_the_files_looked_for(tmp_path):
    folder = save_tiny_vjepa(tmp_path / "vjepa2")
    (folder / "model.safetensors").unlink()
    assert "model.safetensors" in _load_fault(folder)


def test_an_index_whose_shard_is_missing_names_the_shard(tmp_path):
    folder = save_tiny_vjepa(tmp_path / "vjepa2")
    (folder / "model.safetensors").rename(folder / "model-00001-of-00002.safetensors")
    index = {"metadata": {}, "weight_map": {"encoder.layernorm.weight": "model-00001-of-00002.safetensors",
                                            "predictor.proj.weight": "model-00002-of-00002.safetensors"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    assert "model-00002-of-00002.safetensors" in _load_fault(folder)
