"""The world model a TrainConfig describes: the tiny random model of the backend's real classes or
the pretrained checkpoint, in the run's dtype. Used by the trainer, the exporter and the sampler
(training/export.py, training/generate.py), so all three start from the same base.

Decision where the issue was silent: ``parts="transformer"`` skips the VAE and the text encoder of a
pretrained checkpoint (the exporter needs the transformer only, and the Cosmos text encoder alone is
a multi-GB load); the tiny models are built whole (they are small and seeded). With
``text_encoder: offload`` the text encoder (and Wan 2.1 I2V's CLIP image encoder with it) stays in host memory
and `text_encoder_on` brings it to the device around each use in training (rollout and held-out prompts); the
sampler (`load_policy`) loads it on the device and moves it off once every prompt is encoded. A tiny model in
bfloat16 / float16 is cast by the rule diffusers' ``from_pretrained(torch_dtype=...)`` applies
(`cast_like_from_pretrained`: the class's ``_keep_in_fp32_modules`` stay float32), so the base model and a full export of it reloaded by
``from_pretrained`` (training/export.py ``load_policy``) hold the same weights in the same precision.

The trainer's DeepSpeed engine computes this model in other numerics (a bf16 engine casts the float32
modules too; ZeRO-3 replaces the linear layers' function); the full fine-tuning reference and
``load_policy`` (export, generate) follow the engine's (training/numerics.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Literal

import numpy as np
import torch

from policy.conditioning import Conditioning
from policy.diffusers_model import fp32_modules
from policy.world_model import FlowWorldModel
from training.config import PromptSpec, TrainConfig
from training.data import load_frame

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
"""torch dtype of each `TrainConfig.dtype` value."""


def build_world_model(cfg: TrainConfig, device: torch.device | str, parts: Literal["all", "transformer"] = "all",
                      transformer: torch.nn.Module | None = None) -> FlowWorldModel:
    """The tiny random model of the backend's real classes, or the pretrained checkpoint; with ``transformer``
    (loaded in the run's dtype: a full fine-tuning export's) in place of the base transformer, whose weights a
    pretrained checkpoint then does not read (`FlowWorldModel.from_pretrained`)."""
    if cfg.tiny:
        model = FlowWorldModel.tiny_cosmos() if cfg.backend == "cosmos" else FlowWorldModel.tiny_wan()
        if cfg.dtype != "float32":  # from_pretrained already loads torch_dtype; the VAE stays float32
            cast_like_from_pretrained(model.transformer, DTYPES[cfg.dtype])
        if transformer is not None:
            model.transformer = transformer
    else:
        if cfg.model_path is None:
            raise ValueError("model_path is required unless tiny is true")
        whole = parts == "all"
        model = FlowWorldModel.from_pretrained(cfg.model_path, backend=cfg.backend, torch_dtype=DTYPES[cfg.dtype],
                                               load_vae=whole, load_text_encoder=whole,
                                               default_num_frames=cfg.num_frames, revision=cfg.model_revision,
                                               transformer=transformer)
    if cfg.text_encoder == "offload":  # nn.Module.to moves the transformer and the VAE, not the text encoder
        return torch.nn.Module.to(model, device=device)
    return model.to(device=device)


def keeps_float32(name: str, modules: Sequence[str]) -> bool:
    """Whether diffusers' ``from_pretrained(torch_dtype=...)`` keeps the tensor ``name`` (a state-dict name)
    in float32: one of its dotted parts is in the class's ``_keep_in_fp32_modules`` (``modules``)."""
    return any(module in name.split(".") for module in modules)


def cast_like_from_pretrained(transformer: torch.nn.Module, dtype: torch.dtype) -> None:
    """Cast the floating parameters and buffers of a diffusers model in place to ``dtype``, except those its
    class keeps in float32 (`keeps_float32`): the precision ``from_pretrained(torch_dtype=dtype)`` gives
    the same weights. ``.to(dtype)`` casts everything, so the tiny base model sampled in other precision
    than an export of it reloaded with from_pretrained (Wan keeps its time embedder, norms and
    modulation tables in float32)."""
    keep = fp32_modules(transformer)
    with torch.no_grad():
        for name, tensor in [*transformer.named_parameters(), *transformer.named_buffers()]:
            if tensor.is_floating_point():
                tensor.data = tensor.data.to(torch.float32 if keeps_float32(name, keep) else dtype)


@contextlib.contextmanager
def text_encoder_on(world_model: FlowWorldModel, cfg: TrainConfig, device: torch.device | str) -> Iterator[None]:
    """The text encoder on `device` inside the block (`TrainConfig.text_encoder`): with "offload" it is
    moved there on entry and back to host memory on exit, and the device's cached blocks are released;
    with "resident" (or no text encoder) nothing moves. Wan 2.1 I2V's CLIP image encoder, the other prompt
    encoder, moves with it: offloaded, it used to stay in host memory and run on the CPU at every encode
    (``build_world_model`` leaves both there), so its features were not those of a resident run."""
    encoder = world_model.text_encoder
    if cfg.text_encoder == "resident" or encoder is None:
        yield
        return
    encoder.to(device=device)
    if world_model.image_encoder is not None:
        world_model.image_encoder.to(device=device)
    try:
        yield
    finally:
        release_text_encoder(world_model, device)


def release_text_encoder(world_model: FlowWorldModel, device: torch.device | str) -> None:
    """Move the text encoder (if any) and the CLIP image encoder (if any: Wan 2.1 I2V) to host memory and
    release `device`'s cached blocks: both are needed only while prompts are encoded."""
    if world_model.text_encoder is None and world_model.image_encoder is None:
        return
    if world_model.text_encoder is not None:
        world_model.text_encoder.to(device="cpu")
    if world_model.image_encoder is not None:
        world_model.image_encoder.to(device="cpu")
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()


def encode_prompt(world_model: FlowWorldModel, cfg: TrainConfig, spec: PromptSpec, negative: str | None) -> Conditioning:
    """One prompt's conditioning at the run's frame size, fit and clip length: its first frame
    (`training.data.load_frame`), its text and, under guidance, ``negative`` (`negative_prompt`)."""
    return encode_frame(world_model, cfg, load_frame(spec, cfg.height, cfg.width, cfg.image_fit), spec.text, negative)


def encode_frame(world_model: FlowWorldModel, cfg: TrainConfig, image: np.ndarray, text: str,
                 negative: str | None) -> Conditioning:
    """The conditioning of a first frame ``image`` (uint8 [H, W, 3] at the run's size) and ``text``: what
    `encode_prompt` encodes once the prompt's frame is loaded (the trainer loads the frames itself, so a frame
    that cannot be read is reported per prompt: training/prompt_failures.py)."""
    return world_model.encode_prompts(image[None], [text], num_frames=cfg.num_frames, negative_prompt=negative)


def encode_frames(world_model: FlowWorldModel, cfg: TrainConfig, frames: Sequence[np.ndarray], texts: Sequence[str],
                  device: torch.device | str) -> list[Conditioning]:
    """`encode_frame` of each (first frame, text) pair, without gradients, every prompt inside one
    `text_encoder_on` (an offloaded encoder moves once). Nothing here is in the module ZeRO partitions (the
    encoders and the VAE are frozen helpers outside it: policy/frozen.py), so no rank waits on another's encode."""
    with torch.no_grad(), text_encoder_on(world_model, cfg, device):
        return [encode_frame(world_model, cfg, frame, text, negative_prompt(cfg))
                for frame, text in zip(frames, texts, strict=True)]


def negative_prompt(cfg: TrainConfig) -> str | None:
    """The negative prompt to encode with each prompt: the config's when guidance is on, else None."""
    return cfg.negative_prompt if cfg.guidance_scale != 1.0 else None
