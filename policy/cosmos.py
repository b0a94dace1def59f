"""Cosmos-Predict2.5 backend: one velocity call of diffusers ``CosmosTransformer3DModel``.

Conventions, read from diffusers' ``Cosmos2_5_PredictBasePipeline`` (0.42):

* the timestep fed to the transformer is sigma itself, in [0, 1] (the pipeline's
  "assumes sigma(t) in [0, 1]"; no x1000), given per latent frame as [B, 1, F, 1, 1];
  conditioning frames get ``cond_frame_sigma`` (the pipeline's ``conditional_frame_timestep``,
  1e-4 by default: the clean end of the schedule);
* the condition-mask channel is 1 on conditioning frames (our ``cond_mask`` is the opposite: 1 =
  generated), concatenated after the latent channels; the real model also concatenates a
  padding-mask channel (zeros) when ``concat_padding_mask`` is set;
* conditioning frames of the input are replaced by the clean conditioning latent before the
  forward, and the output is the flow-matching velocity ``noise - x0`` (the pipeline's
  ``gt_velocity = latents - cond_latent`` and its flow ``scheduler.step``).
* classifier-free guidance: the pipeline's ``noise_pred + guidance_scale * (noise_pred - noise_pred_neg)`` is
  ``guidance_scale`` g = w - 1 of the project's one convention (`policy.world_model`'s module docstring).
* the pipeline's schedule is not a shifted one: diffusers' conversion script saves a ``UniPCMultistepScheduler``
  with Karras sigmas from 200 to 0.01 mapped to flow sigmas ``s / (1 + s)`` (0.995 .. 0.0099, then 0), which
  spends most of its steps near both ends; ``policy.rollout.sigma_schedule`` (``shift``) is the project's own
  choice for this backend, not a reproduction of that sampler.
* Cosmos-Predict2 (``Cosmos2VideoToWorldPipeline``) wraps the same transformer class in EDM preconditioning
  (``c_in = c_skip = 1 - t``, ``c_out = -t``, ``t = s / (1 + s)``, ``sigma_data`` 1): the transformer there also
  gets the flow state and ``t`` in [0, 1] and its raw output is the velocity, so this call is the same; only its
  T5 text encoder differs (``CosmosQwenTextEncoder`` is Predict2.5's).

A transformer with ``patch_size[0] != 1`` is refused with a ValueError: the per-frame timestep above
assumes a temporal patch size of 1 (diffusers only has a bare assert for it), as in ``policy/wan.py``.

Decision (torchvision): diffusers resizes the padding mask with torchvision, which this project
does not depend on. The tiny test model therefore sets ``concat_padding_mask=False`` and, when
``in_channels`` leaves room for two extra channels, :func:`cosmos_velocity` appends the zero
padding channel itself -- the same patch-embedding input the real model sees. Real checkpoints
(``concat_padding_mask=True``) need torchvision installed.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from policy.shapes import check_latent_patches

# Cosmos-Predict2.5-2B transformer (diffusers layout): 2048 hidden = 16 heads x 128, 28 blocks,
# Reason-1 / Qwen2.5-VL-7B text features (28 layers x 3584 = 100352) projected to 1024,
# RoPE extrapolation (t, h, w) = (1, 3, 3), no extra learnable positional embedding.
COSMOS_PREDICT2_5_2B: dict[str, Any] = {
    "in_channels": 17,
    "out_channels": 16,
    "num_attention_heads": 16,
    "attention_head_dim": 128,
    "num_layers": 28,
    "mlp_ratio": 4.0,
    "text_embed_dim": 1024,
    "adaln_lora_dim": 256,
    "max_size": (128, 240, 240),
    "patch_size": (1, 2, 2),
    "rope_scale": (1.0, 3.0, 3.0),
    "concat_padding_mask": True,
    "extra_pos_embed_type": None,
    "use_crossattn_projection": True,
    "crossattn_proj_in_channels": 100352,
    "encoder_hidden_states_channels": 1024,
}

TINY_COSMOS: dict[str, Any] = {
    "in_channels": 18,  # 16 latent + condition mask + padding mask (appended by cosmos_velocity)
    "out_channels": 16,
    "num_attention_heads": 2,
    "attention_head_dim": 16,
    "num_layers": 2,
    "mlp_ratio": 2.0,
    "text_embed_dim": 32,
    "adaln_lora_dim": 8,
    "max_size": (32, 64, 64),
    "patch_size": (1, 2, 2),
    "rope_scale": (1.0, 3.0, 3.0),
    "concat_padding_mask": False,
    "extra_pos_embed_type": None,
    "use_crossattn_projection": True,
    "crossattn_proj_in_channels": 48,
    "encoder_hidden_states_channels": 32,
}


def build_cosmos_transformer(config: dict[str, Any], seed: int = 0):
    """A randomly initialised ``CosmosTransformer3DModel`` with ``config`` (no hub access)."""
    from diffusers import CosmosTransformer3DModel

    torch.manual_seed(seed)
    return CosmosTransformer3DModel(**config)


def cosmos_text_dim(transformer) -> int:
    """Width of the text features the transformer takes (before its optional projection)."""
    cfg = transformer.config
    return int(cfg.crossattn_proj_in_channels if cfg.use_crossattn_projection else cfg.text_embed_dim)


def cosmos_velocity(
    transformer,
    x_in: Tensor,
    sigma: Tensor,
    cond_mask: Tensor,
    text_embeds: Tensor,
    *,
    cond_frame_sigma: float = 1e-4,
) -> Tensor:
    """Raw transformer velocity for a first-frame-replaced input ``x_in`` [B, C, F, H, W] (float32 out).

    ``sigma`` [B]; ``cond_mask`` [B, 1, F, 1, 1] with 0 on conditioning frames.
    """
    b, c, f, h, w = x_in.shape
    cfg = transformer.config
    p_t, p_h, p_w = (int(p) for p in cfg.patch_size)
    if p_t != 1:  # diffusers only asserts the [B, 1, F, 1, 1] timestep against the token frames
        raise ValueError(f"the Cosmos backend needs a temporal patch size 1 (timesteps are per latent frame, as in "
                         f"Cosmos2_5_PredictBasePipeline), got patch_size {(p_t, p_h, p_w)}")
    check_latent_patches(f, h, w, cfg.patch_size)  # diffusers' patch embedding reshapes without a check
    dtype = transformer.dtype
    is_cond = (1.0 - cond_mask.float()).to(x_in.device)  # 1 on conditioning frames
    timestep = is_cond * cond_frame_sigma + (1.0 - is_cond) * sigma.float().view(b, 1, 1, 1, 1)
    cond_channel = is_cond.expand(b, 1, f, h, w)
    extra = int(cfg.in_channels) - c
    kwargs: dict[str, Any] = {}
    if cfg.concat_padding_mask:
        if extra != 1:
            raise ValueError(f"transformer in_channels {cfg.in_channels} != latent channels {c} + 1 (condition mask)")
        kwargs["padding_mask"] = x_in.new_zeros(1, 1, h, w, dtype=dtype)
    elif extra == 2:
        cond_channel = torch.cat([cond_channel, torch.zeros_like(cond_channel)], dim=1)
    elif extra != 1:
        raise ValueError(f"transformer in_channels {cfg.in_channels} does not fit latent channels {c}")
    out = transformer(
        hidden_states=x_in.to(dtype),
        timestep=timestep,
        encoder_hidden_states=text_embeds.to(dtype),
        condition_mask=cond_channel.to(dtype),
        return_dict=False,
        **kwargs,
    )[0]
    return out.float()
