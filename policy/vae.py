"""Video VAE (diffusers ``AutoencoderKLWan``) between uint8 frames and normalised latents.

Latents handed to the transformer are normalised per channel, ``(z - latents_mean) / latents_std``
with the VAE config's statistics, as the Cosmos-Predict2.5 and Wan pipelines do. The first frame
is encoded alone (a 1-frame clip -> 1 latent frame: the causal Wan VAE maps frame 0 to latent
frame 0). Pixels are mapped to [-1, 1] for the VAE and back to uint8 with rounding and clipping.

``tiny_wan_vae`` builds a small random ``AutoencoderKLWan`` (same class and code path as the
real one; 8x spatial / 4x temporal compression, 16 latent channels) for tests.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor


def tiny_wan_vae(seed: int = 0, z_dim: int = 16):
    """Small random ``AutoencoderKLWan`` (base_dim 8, one res block per level)."""
    from diffusers import AutoencoderKLWan

    torch.manual_seed(seed)
    vae = AutoencoderKLWan(base_dim=8, z_dim=z_dim, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                           temperal_downsample=[False, True, True],
                           latents_mean=[0.0] * z_dim, latents_std=[1.0] * z_dim)
    return vae.eval().requires_grad_(False)


def vae_scale_factors(vae) -> tuple[int, int]:
    """(temporal, spatial) compression of an ``AutoencoderKLWan`` from its config."""
    cfg = vae.config
    temporal = cfg.scale_factor_temporal or 2 ** sum(cfg.temperal_downsample)
    spatial = cfg.scale_factor_spatial or 2 ** len(cfg.temperal_downsample)
    return int(temporal), int(spatial)


def _stats(vae, like: Tensor) -> tuple[Tensor, Tensor]:
    z = vae.config.z_dim
    mean = torch.tensor(vae.config.latents_mean, dtype=torch.float32, device=like.device).view(1, z, 1, 1, 1)
    std = torch.tensor(vae.config.latents_std, dtype=torch.float32, device=like.device).view(1, z, 1, 1, 1)
    return mean, std


def images_to_tensor(images: np.ndarray | Tensor) -> Tensor:
    """uint8 [B, H, W, 3] -> float32 [B, 3, 1, H, W] in [-1, 1] (checked)."""
    t = torch.as_tensor(images)
    if t.dtype != torch.uint8 or t.ndim != 4 or t.shape[-1] != 3:
        raise ValueError(f"images must be uint8 [B, H, W, 3], got {t.dtype} {tuple(t.shape)}")
    return (t.permute(0, 3, 1, 2).float() / 127.5 - 1.0).unsqueeze(2)


@torch.no_grad()
def encode_first_frames(vae, images: np.ndarray | Tensor) -> Tensor:
    """uint8 [B, H, W, 3] -> normalised latent [B, C, 1, H/s, W/s] (float32, distribution mode)."""
    _, spatial = vae_scale_factors(vae)
    pix = images_to_tensor(images)
    h, w = pix.shape[-2:]
    if h % spatial or w % spatial:
        raise ValueError(f"image size {h}x{w} must be divisible by the VAE's spatial factor {spatial}")
    param = next(vae.parameters())
    lat = vae.encode(pix.to(device=param.device, dtype=param.dtype)).latent_dist.mode().float()
    mean, std = _stats(vae, lat)
    return (lat - mean) / std


@torch.no_grad()
def decode_latents(vae, latents: Tensor) -> np.ndarray:
    """Normalised latent [B, C, F, H, W] -> uint8 frames [B, T, H*s, W*s, 3] (numpy)."""
    if latents.ndim != 5 or latents.shape[1] != vae.config.z_dim:
        raise ValueError(f"latents must be [B, {vae.config.z_dim}, F, H, W], got {tuple(latents.shape)}")
    mean, std = _stats(vae, latents)
    param = next(vae.parameters())
    z = (latents.float() * std + mean).to(device=param.device, dtype=param.dtype)
    video = vae.decode(z).sample.float()  # [B, 3, T, H, W] in ~[-1, 1]
    frames = ((video.clamp(-1, 1) + 1.0) * 127.5).round().to(torch.uint8)
    return frames.permute(0, 2, 3, 4, 1).cpu().numpy()
