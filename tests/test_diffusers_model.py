"""policy/diffusers_model.py: the typed reads of the world model's diffusers transformer give what the attribute
gave, on the diffusers model and on peft's LoRA wrapper of it, and a module that is not one is a TypeError naming
it, not an AttributeError deep inside a run."""

from __future__ import annotations

import pytest
import torch

from policy.diffusers_model import enable_gradient_checkpointing, model_config, model_dtype, save_pretrained
from policy.world_model import FlowWorldModel
from training.config import TrainConfig
from training.engine import add_lora


def test_gradient_checkpointing_is_turned_on_for_a_diffusers_model_and_refused_for_another_module():
    model = FlowWorldModel.tiny_cosmos()
    assert not model.transformer.is_gradient_checkpointing
    enable_gradient_checkpointing(model.transformer)  # as training/run_start.py does, before LoRA wraps it
    assert model.transformer.is_gradient_checkpointing
    with pytest.raises(TypeError, match="^Linear is not a diffusers model"):
        enable_gradient_checkpointing(torch.nn.Linear(2, 2))


def test_a_lora_wrapped_transformer_reads_as_its_base_model_and_saves_its_adapter_alone(tmp_path):
    model = FlowWorldModel.tiny_wan()
    patch, dtype = model_config(model.transformer)["patch_size"], model_dtype(model.transformer)
    add_lora(model, TrainConfig(tiny=True, backend="wan", lora_rank=4))
    assert (model_config(model.transformer)["patch_size"], model_dtype(model.transformer)) == (patch, dtype)
    save_pretrained(model.transformer, str(tmp_path / "lora"))
    assert {p.name for p in (tmp_path / "lora").iterdir()} >= {"adapter_config.json", "adapter_model.safetensors"}
    assert not (tmp_path / "lora" / "config.json").exists()  # the adapter, not the whole transformer


def test_a_module_that_is_no_diffusers_model_is_a_type_error_naming_it():
    """The module docstring's promise: torch's AttributeError ('Linear' object has no attribute 'config') was
    what a module without a config or a dtype raised."""
    with pytest.raises(TypeError, match=r"^Linear has no diffusers config \(got NoneType\)"):
        model_config(torch.nn.Linear(2, 2))
    with pytest.raises(TypeError, match=r"^Linear has no diffusers dtype \(got NoneType\)"):
        model_dtype(torch.nn.Linear(2, 2))
