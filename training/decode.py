"""A prompt group's rollouts -> the clips the reward scores (step 1 of training/trainer.py), diverged ones apart.

``decode: vae`` decodes one clip at a time with the model's VAE (decoding long HD clips is memory-heavy);
``decode: preview`` uses the fixed latent -> RGB preview of training/preview.py.

Decision where the issue was silent: a rollout whose latents hold NaN or inf (`policy.vae.nonfinite_kinds`)
used to decode to frames (NaN became black pixels) that the reward scored like any other video. Such a clip
is not decoded: its frames are zeros of the clip's shape (so the group's arrays stay aligned; the
diversity metrics and the rollout videos leave such clips out: training/rollout_log.py) and :func:`decode_group` returns its kind ("nan" / "inf").
The trainer passes the kinds to `training.reward_runner.RewardRunner.submit`, which never shows those
clips to the reward and makes them ineligible (counted as ``ineligible_nan`` / ``ineligible_inf``, with
a reason saying the rollout diverged): no advantage, so they stay out of the update (training/update.py),
and the other clips of the batch are scored as usual.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from policy.vae import NonFinite, nonfinite_kinds
from policy.world_model import FlowWorldModel
from training.config import TrainConfig
from training.preview import latent_preview


def frames_numpy(frames: Any) -> np.ndarray:
    """A decoded clip (tensor or array) as a numpy uint8 array."""
    if isinstance(frames, torch.Tensor):
        frames = frames.detach().cpu().numpy()
    return np.asarray(frames, dtype=np.uint8)


def decode_group(world_model: FlowWorldModel, latents: torch.Tensor,
                 cfg: TrainConfig) -> tuple[np.ndarray, list[NonFinite | None]]:
    """uint8 clips [G, T, H, W, 3] of the rollouts' ``latents`` [G, C, F, H', W'] and, per clip, None or
    why it was not decoded ("nan" / "inf": its frames are zeros; module docstring)."""
    kinds = nonfinite_kinds(latents)
    blank = np.zeros((cfg.num_frames, cfg.height, cfg.width, 3), dtype=np.uint8)
    if cfg.decode == "vae":
        clips = [blank if kind else frames_numpy(world_model.decode(latents[i:i + 1]))[0]
                 for i, kind in enumerate(kinds)]
        return np.stack(clips), kinds
    frames = latent_preview(torch.nan_to_num(latents), cfg.num_frames, cfg.height, cfg.width)
    for i, kind in enumerate(kinds):
        if kind:
            frames[i] = blank
    return frames, kinds
