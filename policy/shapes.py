"""Which clip sizes a world model can generate: pure integer rules, no torch.

A clip of ``num_frames`` x ``height`` x ``width`` pixels becomes a latent of
``(num_frames - 1) / temporal + 1`` x ``height / spatial`` x ``width / spatial`` (the VAE's compression,
``policy.vae.vae_scale_factors``), which the transformer cuts into patches of ``patch`` =
(frames, height, width) latent elements. Both must divide evenly: a size the VAE accepts but the
patches do not (40x40 pixels -> 5x5 latent with 2x2 patches) used to pass the trainer's startup check
and crash at the first rollout, inside diffusers' Cosmos patch embedding with a bare reshape error.

Decisions where the issue was silent:

* Every clip these models generate starts from one conditioning latent frame (Image2World), so a clip
  needs at least one more latent frame to generate: ``num_frames >= 1 + temporal`` (5 for the 4x
  temporal Wan VAE). ``num_frames: 1`` used to pass and fail at prompt encoding ("need 0 <=
  num_cond_frames < num_latent_frames").
* The messages name the setting (num_frames, height, width) and the multiple it needs, since the user
  fixes the config, not the latent.
* The clip length a model generates when none is given (`native_num_frames`) is its family's own:
  Cosmos-Predict2.5 93 (``Cosmos2_5_PredictBasePipeline``'s ``num_frames`` default); Wan 2.1 I2V-14B 81
  (``WanImageToVideoPipeline``'s default, the 5 s at 16 fps it was trained on); Wan 2.2 TI2V-5B 121 (its 5 s
  at 24 fps: upstream Wan 2.2's ``ti2v_5B.frame_num``, and the length diffusers' TI2V-5B examples pass; the
  pipeline's own default, 81, is one class-wide value shared with Wan 2.1). The Wan family is read from the
  transformer's channels: more input than output channels is the I2V-14B channel-concat layout.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

COSMOS_NUM_FRAMES, WAN_I2V_NUM_FRAMES, WAN_TI2V_NUM_FRAMES = 93, 81, 121
"""Each family's own clip length in pixel frames (module docstring)."""

_WAN_VAE_DEFAULTS = {"dim_mult": [1, 2, 4, 4], "temperal_downsample": [False, True, True], "patch_size": None}


def vae_compression(config: Mapping[str, Any]) -> tuple[int, int]:
    """(temporal, spatial) compression of an ``AutoencoderKLWan`` with this config (its ``config.json``; missing keys
    take the class defaults), as its encoder applies it: one spatial halving per level but the last of
    ``dim_mult``, a temporal one where ``temperal_downsample`` says so at those levels, and ``patch_size``
    (Wan 2.2) folded into channels first. Not the config's ``scale_factor_temporal`` / ``scale_factor_spatial``:
    the class fills them with 4 / 8 whatever the layout (diffusers' Wan pipelines read them; its Cosmos 2.5
    ones compute ``2 ** sum(temperal_downsample)`` / ``2 ** len(...)``, without ``patch_size``)."""
    cfg = {**_WAN_VAE_DEFAULTS, **{k: v for k, v in config.items() if v is not None}}
    levels = len(cfg["dim_mult"]) - 1
    down = list(cfg["temperal_downsample"])[:levels]
    patch = int(cfg["patch_size"] or 1)
    return 2 ** sum(bool(d) for d in down), 2 ** levels * patch


def clip_latent_size(num_frames: int, height: int, width: int, *, temporal: int, spatial: int,
                     patch: tuple[int, int, int]) -> tuple[int, int, int]:
    """(F, H, W) of the latent of a generated clip; ValueError naming every setting that does not fit the
    VAE's ``temporal`` / ``spatial`` compression and the transformer's ``patch`` (frames, height, width)."""
    p_t, p_h, p_w = (int(p) for p in patch)
    problems: list[str] = []
    if num_frames < 1 + temporal or (num_frames - 1) % temporal:
        problems.append(f"num_frames must be 1 + {temporal} k with k >= 1 (the conditioning frame plus at least "
                        f"one generated latent frame; the smallest is {1 + temporal}), got {num_frames}")
    elif ((num_frames - 1) // temporal + 1) % p_t:
        problems.append(f"num_frames {num_frames} gives {(num_frames - 1) // temporal + 1} latent frames, not a "
                        f"multiple of the transformer's temporal patch {p_t}: use num_frames = 1 + {temporal} k "
                        f"with k + 1 a multiple of {p_t}")
    for name, size, p in (("height", height, p_h), ("width", width, p_w)):
        if size < 1 or size % (spatial * p):
            problems.append(f"{name} must be a multiple of {spatial * p} (the VAE's {spatial}x spatial compression "
                            f"times the transformer's patch {p}), got {size}")
    if problems:
        raise ValueError("; ".join(problems))
    return (num_frames - 1) // temporal + 1, height // spatial, width // spatial


def check_latent_patches(frames: int, height: int, width: int, patch: tuple[int, int, int]) -> None:
    """ValueError unless a latent of ``frames`` x ``height`` x ``width`` splits into whole transformer
    patches (what the transformer's patch embedding needs; diffusers' Cosmos reshapes without a check)."""
    p_t, p_h, p_w = (int(p) for p in patch)
    if frames % p_t or height % p_h or width % p_w:
        raise ValueError(f"latent size {frames}x{height}x{width} (frames x height x width) must be divisible by the "
                         f"transformer's patch size {(p_t, p_h, p_w)}: choose num_frames / height / width that "
                         "FlowWorldModel.latent_shape accepts")


def native_num_frames(backend: str, transformer_config: Mapping[str, Any]) -> int:
    """The clip length (pixel frames) the model family of ``backend`` with this transformer config generates when
    none is given (module docstring): Cosmos 93, Wan 2.1 I2V-14B (``in_channels`` > ``out_channels``) 81, else
    (Wan 2.2 TI2V) 121."""
    if backend == "cosmos":
        return COSMOS_NUM_FRAMES
    c_in, c_out = wan_channels(transformer_config)
    return WAN_I2V_NUM_FRAMES if c_in != c_out else WAN_TI2V_NUM_FRAMES


WAN_DEFAULT_CHANNELS = 16  # WanTransformer3DModel's in_channels / out_channels defaults


def wan_channels(transformer_config: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """The (input, output) channels a WanTransformer3DModel built from this config has: a missing field takes the
    class default (16), ``out_channels`` null or 0 is ``in_channels`` (diffusers: ``out_channels or in_channels``);
    None for a value that is not an int."""
    def channels(value: Any) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    c_in = channels(transformer_config.get("in_channels", WAN_DEFAULT_CHANNELS))
    out = transformer_config.get("out_channels", WAN_DEFAULT_CHANNELS)
    return c_in, channels(out) if out else c_in
