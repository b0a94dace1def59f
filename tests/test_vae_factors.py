"""policy.vae.vae_scale_factors is the compression the VAE's encoder actually applies. Before: it read the config's
``scale_factor_temporal`` / ``scale_factor_spatial``, which AutoencoderKLWan fills with 4 / 8 whatever its
``temperal_downsample``, ``dim_mult`` and ``patch_size`` are (diffusers' Wan pipelines read them; the Cosmos 2.5
ones compute ``2 ** sum(temperal_downsample)`` / ``2 ** len(temperal_downsample)``, which misses ``patch_size``).
A VAE built with other factors got latent shapes (and startup size checks) that its encoder does not produce."""

from __future__ import annotations

import pytest
import torch

CASES = [
    dict(dim_mult=[1, 1, 1, 1], temperal_downsample=[False, True, False]),  # 2x temporal, 8x spatial
    dict(dim_mult=[1, 1, 1], temperal_downsample=[False, True]),  # 2x temporal, 4x spatial
    dict(dim_mult=[1, 1, 1, 1], temperal_downsample=[False, False, False]),  # no temporal compression
    dict(dim_mult=[1, 1, 1, 1], temperal_downsample=[False, True, True], patch_size=2, in_channels=12,
         out_channels=12, is_residual=True),  # Wan 2.2 layout: 16x spatial
]


def _vae(kw):
    from diffusers import AutoencoderKLWan

    torch.manual_seed(0)
    return AutoencoderKLWan(base_dim=8, z_dim=4, num_res_blocks=1, latents_mean=[0.0] * 4, latents_std=[1.0] * 4,
                            **kw).eval()


@pytest.mark.parametrize("kw", CASES)
def test_scale_factors_are_the_encoders_compression(kw):
    from policy.vae import vae_scale_factors
    from training.model_check import _vae_temporal

    vae = _vae(kw)
    temporal, spatial = vae_scale_factors(vae)
    frames, size = 9, 32
    with torch.no_grad():
        z = vae.encode(torch.zeros(1, 3, frames, size, size)).latent_dist.mode()
    assert tuple(z.shape[2:]) == ((frames - 1) // temporal + 1, size // spatial, size // spatial), kw
    assert _vae_temporal(dict(vae.config)) == temporal  # the startup check reads config.json the same way


def test_the_default_wan_vae_keeps_4x_temporal_8x_spatial():
    from policy.shapes import vae_compression

    assert vae_compression({}) == (4, 8)  # AutoencoderKLWan's defaults: Wan 2.1 / Cosmos-Predict2.5
    assert vae_compression({"patch_size": 2, "scale_factor_spatial": 16}) == (4, 16)  # Wan 2.2 TI2V-5B
