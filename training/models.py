"""The world model a TrainConfig describes: the tiny random model of the backend's real classes or
the pretrained checkpoint, in the run's dtype. Used by the trainer, the exporter and the sampler
(training/export.py, training/generate.py), so all three start from the same base.

Decision where the issue was silent: ``parts="transformer"`` skips the VAE and the text encoder of a
pretrained checkpoint (the exporter needs the transformer only, and the Cosmos text encoder alone is
a multi-GB load); the tiny models are built whole (they are small and seeded). With
``text_encoder: offload`` the text encoder stays in host memory and `text_encoder_on` brings it to the
device around each use in training (rollout and held-out prompts); the sampler (`load_policy`) keeps
it on the device, as inference has the memory.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Literal

import torch

from policy.world_model import Conditioning, FlowWorldModel
from training.config import PromptSpec, TrainConfig
from training.data import load_frame

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
"""torch dtype of each `TrainConfig.dtype` value."""


def build_world_model(cfg: TrainConfig, device: torch.device | str,
                      parts: Literal["all", "transformer"] = "all") -> FlowWorldModel:
    """The tiny random model of the backend's real classes, or the pretrained checkpoint."""
    if cfg.tiny:
        model = FlowWorldModel.tiny_cosmos() if cfg.backend == "cosmos" else FlowWorldModel.tiny_wan()
    else:
        if cfg.model_path is None:
            raise ValueError("model_path is required unless tiny is true")
        whole = parts == "all"
        model = FlowWorldModel.from_pretrained(cfg.model_path, backend=cfg.backend, torch_dtype=DTYPES[cfg.dtype],
                                               load_vae=whole, load_text_encoder=whole,
                                               default_num_frames=cfg.num_frames)
    if cfg.tiny and cfg.dtype != "float32":  # from_pretrained already loaded torch_dtype; the VAE stays float32
        model.transformer.to(dtype=DTYPES[cfg.dtype])
    if cfg.text_encoder == "offload":  # nn.Module.to moves the transformer and the VAE, not the text encoder
        return torch.nn.Module.to(model, device=device)
    return model.to(device=device)


@contextlib.contextmanager
def text_encoder_on(world_model: FlowWorldModel, cfg: TrainConfig, device: torch.device | str) -> Iterator[None]:
    """The text encoder on `device` inside the block (`TrainConfig.text_encoder`): with "offload" it is
    moved there on entry and back to host memory on exit, and the device's cached blocks are released;
    with "resident" (or no text encoder) nothing moves."""
    encoder = world_model.text_encoder
    if cfg.text_encoder == "resident" or encoder is None:
        yield
        return
    encoder.to(device=device)
    try:
        yield
    finally:
        release_text_encoder(world_model, device)


def release_text_encoder(world_model: FlowWorldModel, device: torch.device | str) -> None:
    """Move the text encoder (if any) to host memory and release `device`'s cached blocks."""
    if world_model.text_encoder is None:
        return
    world_model.text_encoder.to(device="cpu")
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()


def encode_prompt(world_model: FlowWorldModel, cfg: TrainConfig, spec: PromptSpec, negative: str | None) -> Conditioning:
    """One prompt's conditioning at the run's frame size, fit and clip length: its first frame
    (`training.data.load_frame`), its text and, under guidance, ``negative`` (`negative_prompt`)."""
    image = load_frame(spec, cfg.height, cfg.width, cfg.image_fit)
    return world_model.encode_prompts(image[None], [spec.text], num_frames=cfg.num_frames, negative_prompt=negative)


def negative_prompt(cfg: TrainConfig) -> str | None:
    """The negative prompt to encode with each prompt: the config's when guidance is on, else None."""
    return cfg.negative_prompt if cfg.guidance_scale != 1.0 else None
