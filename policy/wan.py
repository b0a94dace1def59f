"""Wan 2.2 TI2V backend: one velocity call of diffusers ``WanTransformer3DModel``.

Conventions, read from diffusers' ``WanImageToVideoPipeline`` with ``expand_timesteps=True``
(the Wan 2.2 TI2V-5B mode) in diffusers 0.42:

* the timestep is ``sigma * num_train_timesteps`` (1000; the flow schedulers' ``timesteps =
  sigmas * 1000``), given per token as [B, F * H/p_h * W/p_w]: tokens of conditioning frames get
  timestep 0 (the pipeline multiplies its first-frame mask, 0 on frame 0, by t);
* conditioning frames of the input are replaced by the clean first-frame latent before the
  forward (``(1 - first_frame_mask) * condition + first_frame_mask * latents``);
* the output is the flow-matching velocity ``noise - x0`` (flow ``scheduler.step``:
  ``x_prev = x + (sigma_prev - sigma) * v``).

Decision where the issue was silent: the per-token timesteps give every token of a latent frame that
frame's timestep, which assumes a temporal patch size of 1 (every Wan 2.x checkpoint's). A transformer
with ``patch_size[0] != 1`` is refused with a ValueError (it used to fail inside diffusers with a bare
tensor-size mismatch); what a token spanning a conditioning and a generated frame should get is open.

The installed diffusers supports per-token timesteps (``timestep.ndim == 2`` in
``WanTransformer3DModel.forward``), so no fallback is needed. TI2V uses no CLIP image embedding (it
conditions through the first latent frame only); the Wan 2.1 I2V-14B layout (channel-concat condition,
per-sample timestep, CLIP image branch) is ``condition`` / ``image_embeds`` here, built by `policy.wan_i2v`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from policy.shapes import check_latent_patches

# Wan2.2-TI2V-5B transformer (diffusers layout): 3072 hidden = 24 heads x 128, 30 blocks,
# 48 latent channels (Wan 2.2 VAE, 16x spatial / 4x temporal), UMT5-XXL text (4096).
WAN2_2_TI2V_5B: dict[str, Any] = {
    "patch_size": (1, 2, 2),
    "num_attention_heads": 24,
    "attention_head_dim": 128,
    "in_channels": 48,
    "out_channels": 48,
    "text_dim": 4096,
    "freq_dim": 256,
    "ffn_dim": 14336,
    "num_layers": 30,
    "cross_attn_norm": True,
    "qk_norm": "rms_norm_across_heads",
    "eps": 1e-6,
    "rope_max_seq_len": 1024,
}

TINY_WAN: dict[str, Any] = {
    "patch_size": (1, 2, 2),
    "num_attention_heads": 2,
    "attention_head_dim": 16,
    "in_channels": 16,
    "out_channels": 16,
    "text_dim": 24,
    "freq_dim": 32,
    "ffn_dim": 64,
    "num_layers": 2,
    "cross_attn_norm": True,
    "qk_norm": "rms_norm_across_heads",
    "eps": 1e-6,
    "rope_max_seq_len": 64,
}

NUM_TRAIN_TIMESTEPS = 1000


def build_wan_transformer(config: dict[str, Any], seed: int = 0):
    """A randomly initialised ``WanTransformer3DModel`` with ``config`` (no hub access)."""
    from diffusers import WanTransformer3DModel

    torch.manual_seed(seed)
    return WanTransformer3DModel(**config)


def wan_velocity(
    transformer,
    x_in: Tensor,
    sigma: Tensor,
    cond_mask: Tensor,
    text_embeds: Tensor,
    *,
    num_train_timesteps: int = NUM_TRAIN_TIMESTEPS,
    condition: Tensor | None = None,
    image_embeds: Tensor | None = None,
) -> Tensor:
    """Raw transformer velocity for a first-frame-replaced input ``x_in`` [B, C, F, H, W] (float32 out).

    ``sigma`` [B]; ``cond_mask`` [B, 1, F, 1, 1] with 0 on conditioning frames. The I2V-14B layout
    (`policy.wan_i2v`): ``condition`` [B, T + C, F, H, W] is concatenated to the input's channels and the
    timestep is one per sample; ``image_embeds`` [B, N, D] (CLIP, Wan 2.1) go to the image cross-attention.
    """
    b, _, f, h, w = x_in.shape
    p_t, p_h, p_w = (int(p) for p in transformer.config.patch_size)
    if p_t != 1:  # module docstring: one timestep per latent frame needs one frame per token
        raise ValueError(f"the Wan backend needs a temporal patch size 1 (per-token timesteps are per latent "
                         f"frame, as in WanImageToVideoPipeline), got patch_size {(p_t, p_h, p_w)}")
    check_latent_patches(f, h, w, transformer.config.patch_size)
    dtype = transformer.dtype
    if (transformer.config.image_dim is None) != (image_embeds is None):  # else diffusers splits the text tokens
        raise ValueError(f"transformer image_dim {transformer.config.image_dim} needs CLIP image embeddings "
                         f"exactly when it is set; got image_embeds {image_embeds is not None}")
    if condition is not None:  # I2V-14B: channel concat, one timestep per sample (WanImageToVideoPipeline)
        if condition.shape[0] != b or condition.shape[2:] != x_in.shape[2:]:
            raise ValueError(f"condition {tuple(condition.shape)} does not match the latent {tuple(x_in.shape)}")
        x_in = torch.cat([x_in.float(), condition.to(x_in.device).float()], dim=1)
        # the pipeline's t.expand(B), given per token (same value): diffusers' output is the same, and unlike
        # the [B] path it does not change with the batch size, so a micro-batch recomputes the rollout exactly
        timestep = (sigma.float() * num_train_timesteps).view(b, 1).expand(b, f * (h // p_h) * (w // p_w))
    else:
        gen = cond_mask.float().to(x_in.device).expand(b, 1, f, h // p_h, w // p_w)  # 1 = generated
        timestep = (gen * sigma.float().view(b, 1, 1, 1, 1) * num_train_timesteps).reshape(b, -1)
    if x_in.shape[1] != transformer.config.in_channels:
        raise ValueError(f"the transformer takes {transformer.config.in_channels} channels, got {x_in.shape[1]} "
                         "(an I2V-14B transformer needs the conditioning's image condition)")
    out = transformer(
        hidden_states=x_in.to(dtype),
        timestep=timestep,
        encoder_hidden_states=text_embeds.to(dtype),
        encoder_hidden_states_image=None if image_embeds is None else image_embeds.to(x_in.device, dtype),
        return_dict=False,
    )[0]
    return out.float()
