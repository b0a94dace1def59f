"""The world model a TrainConfig describes: the tiny random model of the backend's real classes or
the pretrained checkpoint, in the run's dtype. Used by the trainer, the exporter and the sampler
(training/export.py, training/generate.py), so all three start from the same base.

Decision where the issue was silent: ``parts="transformer"`` skips the VAE and the text encoder of a
pretrained checkpoint (the exporter needs the transformer only, and the Cosmos text encoder alone is
a multi-GB load); the tiny models are built whole (they are small and seeded).
"""

from __future__ import annotations

from typing import Literal

import torch

from policy.world_model import FlowWorldModel
from training.config import TrainConfig

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
    return model.to(device=device)


def negative_prompt(cfg: TrainConfig) -> str | None:
    """The negative prompt to encode with each prompt: the config's when guidance is on, else None."""
    return cfg.negative_prompt if cfg.guidance_scale != 1.0 else None
