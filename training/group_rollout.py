"""The G rollouts of one prompt group during training (DESIGN.md §6, step 1 of the loop in training/trainer.py).

Rollout noise comes from a generator seeded by (run seed, iteration, rank, prompt slot), so a resumed run
draws exactly the noise of an uninterrupted one; a group sampled ``rollout_batch`` at a time draws chunk
``c`` from the generator of that seed plus ``c``.
"""

from __future__ import annotations

import math

import torch

from policy.conditioning import Conditioning
from policy.rollout import Rollout, RolloutConfig, cat_rollouts, rollout
from policy.world_model import FlowWorldModel
from training.config import TrainConfig
from training.data import derive_seed
from training.update import chunk


def sample_group(world_model: FlowWorldModel, cond: Conditioning, rcfg: RolloutConfig, cfg: TrainConfig,
                 device: torch.device, seed: tuple[int, ...]) -> Rollout:
    """The G rollouts of one prompt (``cond`` repeated G times), ``cfg.rollout_batch`` at a time. The whole
    group draws its noise from the generator of ``seed`` (run seed, iteration, rank, prompt slot); chunk
    ``c`` of a chunked group from that of ``seed + (c,)``."""
    size = cfg.rollout_batch or cfg.group_size
    if size >= cfg.group_size:
        return rollout(world_model, cond, rcfg, generator=torch.Generator(device=device).manual_seed(derive_seed(*seed)))
    parts = [rollout(world_model, cond.select(chunk(c, size, cfg.group_size)), rcfg,
                     generator=torch.Generator(device=device).manual_seed(derive_seed(*seed, c)))
             for c in range(math.ceil(cfg.group_size / size))]
    return cat_rollouts(parts, cond)
