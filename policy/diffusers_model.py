"""What the policy reads of its diffusers models, typed: their ``config`` and ``dtype``, the modules their class
keeps in float32, their ``save_pretrained`` and ``enable_gradient_checkpointing``.

The world model's transformer and VAE are held as ``torch.nn.Module``: the transformer is a diffusers
``ModelMixin`` or, once LoRA is on (`training.engine.add_lora`), peft's wrapper of one, which hands these
attributes on to it. torch types every attribute a module does not declare as ``Tensor | Module``, so each read
(``transformer.config.patch_size``, ``transformer.dtype``, ``transformer.save_pretrained(...)``,
``transformer.enable_gradient_checkpointing()``: "Tensor not callable") was a type error; these read them once,
checked.

Decisions where the issue was silent:
- A config is read by key (``config["patch_size"]``): diffusers' ``FrozenDict`` also sets its keys as attributes,
  but it is typed as a mapping, and the key names the field as the model's ``config.json`` does.
- A model without a mapping ``config`` or a torch ``dtype`` is a TypeError naming what it got (a module that is
  not a diffusers model), not an AttributeError from deep inside a rollout.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch


def model_config(model: torch.nn.Module) -> Mapping[str, Any]:
    """The diffusers config (``FrozenDict``) of ``model`` (module docstring)."""
    try:
        config = model.config
    except AttributeError:  # torch's for a module without one: a TypeError as for one that is no mapping
        config = None
    if not isinstance(config, Mapping):
        raise TypeError(f"{type(model).__name__} has no diffusers config (got {type(config).__name__})")
    return config


def model_dtype(model: torch.nn.Module) -> torch.dtype:
    """The dtype diffusers gives ``model`` (``ModelMixin.dtype``: its compute dtype, not a float32-kept module's)."""
    try:
        dtype = model.dtype
    except AttributeError:  # torch's for a module without one: a TypeError as for one that is no torch dtype
        dtype = None
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"{type(model).__name__} has no diffusers dtype (got {type(dtype).__name__})")
    return dtype


def fp32_modules(model: torch.nn.Module) -> list[str]:
    """The module names diffusers' ``from_pretrained(torch_dtype=...)`` keeps in float32 for ``model``'s class
    (``_keep_in_fp32_modules``; none for most)."""
    from diffusers.models.modeling_utils import ModelMixin  # diffusers.ModelMixin: a dummy class to mypy

    if not isinstance(model, ModelMixin):
        raise TypeError(f"{type(model).__name__} is not a diffusers model")
    return list(type(model)._keep_in_fp32_modules or [])


def enable_gradient_checkpointing(model: torch.nn.Module) -> None:
    """Turn on diffusers' gradient checkpointing of ``model`` (``ModelMixin.enable_gradient_checkpointing``:
    its blocks' activations recomputed in the backward; ``TrainConfig.gradient_checkpointing``)."""
    from diffusers.models.modeling_utils import ModelMixin  # diffusers.ModelMixin: a dummy class to mypy

    if not isinstance(model, ModelMixin):
        raise TypeError(f"{type(model).__name__} is not a diffusers model")
    model.enable_gradient_checkpointing()


def save_pretrained(model: torch.nn.Module, folder: str) -> None:
    """Write ``model`` to ``folder`` with its own ``save_pretrained``: diffusers' (the whole model) or, for peft's
    LoRA wrapper, peft's (the adapter alone)."""
    from diffusers.models.modeling_utils import ModelMixin  # diffusers.ModelMixin: a dummy class to mypy
    from peft import PeftModel

    if not isinstance(model, ModelMixin | PeftModel):
        raise TypeError(f"{type(model).__name__} is neither a diffusers model nor a peft LoRA model")
    model.save_pretrained(folder)
