"""The numerics of the run's DeepSpeed engine, for every other model that samples or scores for the run.

The trainer's policy rolls out, trains and is evaluated (eval.jsonl, eval_videos) inside the DeepSpeed
engine, which computes differently from the model `training.models.build_world_model` returns:

* a bfloat16 (or float16) engine casts every parameter to that dtype, also the modules diffusers'
  ``from_pretrained(torch_dtype=...)`` keeps in float32 (``_keep_in_fp32_modules``: Wan's time embedder,
  norms and modulation tables; the tiny models follow the same rule). Keeping them float32 inside the
  engine is not possible (its flat bf16 partitions); buffers keep their dtype;
* ZeRO-3 (unless the DeepSpeed JSON sets ``zero_optimization.memory_efficient_linear: false``) replaces
  ``torch.nn.functional.linear`` for the whole training process with its memory-efficient linear, which
  adds the bias after the matmul (a second rounding in bf16) where torch fuses it (``addmm``).

Decision: every model that samples or scores for a run uses the engine's numerics (`like_engine`): the
full fine-tuning reference (training/engine.py ``frozen_reference``; under ZeRO-3 it already shares the
process's replaced linear) and ``load_policy`` for export and generate, with ``--weights trained`` and
``base`` alike, so same-noise comparisons stay fair. Otherwise mu-KL measured precision noise (1e-5 at
an unchanged bf16 Wan policy, with approx_kl 0) and the training's held-out videos differed from
``training.generate`` of the export by up to 5 pixel levels on the same noise. Real diffusers
checkpoints are affected the same way: their float32 modules are cast as the engine casts them. The
exported files keep those modules in float32 (DeepSpeed's master weights), as diffusers saves them.
``load_policy`` computes the linear layers of its transformer, VAE and text encoder (`torch.nn.Linear`
modules; none of these models calls the function directly) with DeepSpeed's ZeRO-3 linear itself, per
module rather than process-wide as the engine does.
"""

from __future__ import annotations

import types

import torch

from policy.world_model import FlowWorldModel
from training.config import ConfigError, TrainConfig
from training.ds_config import read_ds_config
from training.models import DTYPES


def cast_like_engine(transformer: torch.nn.Module, dtype: str) -> None:
    """Give ``transformer`` the precision DeepSpeed's engine trains a run of `TrainConfig.dtype` ``dtype`` in:
    with bfloat16 / float16 every floating parameter is cast to it in place (the modules
    ``training.models.cast_like_from_pretrained`` kept in float32 too); buffers keep their dtype, as the
    engine leaves them. float32: nothing changes."""
    if dtype == "float32":
        return
    with torch.no_grad():
        for param in transformer.parameters():
            if param.is_floating_point() and param.dtype != DTYPES[dtype]:
                param.data = param.data.to(DTYPES[dtype])


def zero3_linear(cfg: TrainConfig) -> bool:
    """Whether the engine of run ``cfg`` replaces ``torch.nn.functional.linear`` with ZeRO-3's memory-efficient
    linear: ZeRO stage 3 (``zero_stage``, else the JSON's) and ``memory_efficient_linear`` not false in the
    JSON (DeepSpeed's default: true). A JSON that is no longer readable counts as DeepSpeed's defaults."""
    try:
        zero = read_ds_config(cfg.ds_config).get("zero_optimization") or {}
    except ConfigError:
        zero = {}
    stage = cfg.zero_stage if cfg.zero_stage is not None else zero.get("stage", 0)
    return stage == 3 and zero.get("memory_efficient_linear", True) is not False


def _zero3_forward(self: torch.nn.Linear, input: torch.Tensor) -> torch.Tensor:
    from deepspeed.runtime.zero.linear import zero3_linear_wrap

    return zero3_linear_wrap(input, self.weight, self.bias)


def use_zero3_linear(module: torch.nn.Module) -> int:
    """Compute every `torch.nn.Linear` in ``module`` with DeepSpeed's ZeRO-3 linear (the function the engine
    puts in place of ``torch.nn.functional.linear``); returns how many."""
    linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
    for linear in linears:
        linear.forward = types.MethodType(_zero3_forward, linear)  # type: ignore[method-assign]
    return len(linears)


def like_engine(world_model: FlowWorldModel, cfg: TrainConfig) -> FlowWorldModel:
    """``world_model`` (in place) in the numerics run ``cfg``'s engine samples with (module docstring)."""
    cast_like_engine(world_model.transformer, cfg.dtype)
    if zero3_linear(cfg):
        encoder = getattr(world_model.text_encoder, "model", None)  # the Hugging Face model of a real encoder
        for part in (world_model.transformer, world_model.vae, encoder):
            if isinstance(part, torch.nn.Module):
                use_zero3_linear(part)
    return world_model
