"""A fixed linear latent -> RGB preview decoder (``decode: preview`` in TrainConfig).

Video UIs show cheap previews of diffusion latents with a fixed linear map from latent channels
to RGB instead of running the VAE. Here channel groups are averaged into three colour planes,
squashed with ``tanh`` and upsampled (nearest) to the clip's frame count and size::

    rgb_k = 127.5 * (1 + tanh(mean_{c = k mod 3} z_c / 2))          k = 0, 1, 2

Latent frame 0 gives pixel frame 0 (the causal VAE's conditioning frame); each later latent frame
covers ``(num_frames - 1) / (F - 1)`` pixel frames. Every channel counts, also when C is no multiple
of 3 (Wan's 16: red averages 6 channels, green and blue 5 each; the channels past the last multiple of 3
were dropped, unlike the formula says).

A fast alternative to the VAE (``decode: vae``, the default and what the smoke config uses): no
network runs, so rewards on preview frames are cheap for quick CPU experiments or debugging a
reward. It is not the model's decoder: the GPU recipes and the smoke run decode with the VAE
(the tiny random VAE of the smoke run gets the responsive initialisation of policy/vae.py so its
frames follow the latents).
"""

from __future__ import annotations

import numpy as np
import torch


def latent_preview(latents: torch.Tensor, num_frames: int, height: int, width: int) -> np.ndarray:
    """Latents [B, C, F, H', W'] (C >= 3) -> uint8 frames [B, num_frames, height, width, 3]."""
    if latents.ndim != 5 or latents.shape[1] < 3:
        raise ValueError(f"latents must be [B, C>=3, F, H, W], got {tuple(latents.shape)}")
    f = latents.shape[2]
    if f > 1 and (num_frames - 1) % (f - 1):
        raise ValueError(f"num_frames - 1 ({num_frames - 1}) must be a multiple of latent frames - 1 ({f - 1})")
    if f == 1 and num_frames != 1:
        raise ValueError(f"one latent frame gives one pixel frame, not {num_frames}")
    z = latents.detach().float()
    rgb = torch.stack([z[:, k::3].mean(dim=1) for k in range(3)], dim=1)  # channel c -> colour c mod 3, every c
    per = (num_frames - 1) // (f - 1) if f > 1 else 1
    index = torch.tensor([0] + [1 + (t - 1) // per for t in range(1, num_frames)], device=z.device)
    rgb = rgb.index_select(2, index)  # [B, 3, T, H', W']
    rgb = torch.nn.functional.interpolate(rgb, size=(num_frames, height, width), mode="nearest")
    frames = (127.5 * (1.0 + torch.tanh(rgb / 2.0))).round().clamp(0, 255).to(torch.uint8)
    return frames.permute(0, 2, 3, 4, 1).cpu().numpy()
