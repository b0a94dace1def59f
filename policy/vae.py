"""Video VAE (diffusers ``AutoencoderKLWan``) between uint8 frames and normalised latents.

Latents handed to the transformer are normalised per channel, ``(z - latents_mean) / latents_std``
with the VAE config's statistics, as the Cosmos-Predict2.5 and Wan pipelines do. The first frame
is encoded alone (a 1-frame clip -> 1 latent frame: the causal Wan VAE maps frame 0 to latent
frame 0). Pixels are mapped to [-1, 1] for the VAE and back to uint8 with rounding and clipping.

``tiny_wan_vae`` builds a small random ``AutoencoderKLWan`` (same class and code path as the
real one; 8x spatial / 4x temporal compression, 16 latent channels) for tests and the CPU smoke run.

Decision where the issue was silent -- the tiny VAE's decoder gets a deliberate, seeded
initialisation (``init="responsive"``, the default; :func:`init_responsive_decoder`). With
PyTorch's default initialisation every conv shrinks the signal about 3x while its random bias does
not, and the decoder's RMS norms keep only the direction of each feature vector, so after a dozen
layers the output is a fixed bias texture: any latent decodes to almost the same frame (shifting a
latent channel by 3 moves the mean brightness by ~0.002), and no reward on decoded frames can be
learned. The responsive initialisation keeps the real architecture and random channel mixing, but:

1. every decoder conv (and ``post_quant_conv``) is a random channel-mixing matrix (N(0, 1/fan_in))
   on its causal centre tap only (a Dirac kernel), bias 0: each pixel depends on the latent under
   it, upsampling acts as nearest-neighbour in space;
2. the temporal upsamplers' ``time_conv`` duplicate frames (identity on both halves);
3. residual branches (each residual block's ``conv2``, the attention ``proj``) are scaled by
   ``residual_scale`` (0.1): blocks start close to the identity, as in small-residual inits;
4. ``conv_in`` gets a constant random bias, scaled so that at the output RMS norm this constant
   feature is ``anchor`` (16) times larger than the change a standard-normal latent causes: the
   norm then divides by about this constant, so the decoder is close to linear in the latent (it
   only saturates for latents many times larger) instead of keeping only their direction;
5. ``conv_out``'s colour rows are pulled together (``luma``: the latent moves brightness more than
   hue) and scaled so that a standard-normal latent changes each pixel's brightness by ``contrast``
   (0.15, std); its bias is set so that the zero latent decodes to mid-grey.

Both scales are calibrated on a seeded latent, so every seed gives a decoder of the same
sensitivity (about 0.14 brightness per unit-norm latent shift of a whole region).
Result: decoded brightness and frame-to-frame change follow the latents smoothly and monotonically
along a direction (tested), roughly like a linear latent->RGB preview followed by the VAE's clamp.
``init="default"`` keeps diffusers' own initialisation.

Decision where the issue was silent -- :func:`decode_latents` refuses latents holding NaN or inf with a
:class:`NonFiniteLatentsError` naming the rows (:func:`nonfinite_kinds`). They used to decode to frames
(a NaN turned into black pixels at the uint8 cast) that a reward then scored like any other video. Callers
that decode many clips check the rows first and record the diverged ones (training/decode.py for the
trainer's rollouts, training/generate.py per clip).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal, cast, get_args

import numpy as np
import torch
from torch import Tensor

if TYPE_CHECKING:  # pragma: no cover
    # its module, not the package: mypy reads diffusers/__init__ as giving its torch-less placeholder class
    from diffusers.models.autoencoders.autoencoder_kl_wan import AutoencoderKLWan
    from diffusers.models.autoencoders.vae import DecoderOutput
    from diffusers.models.modeling_outputs import AutoencoderKLOutput

TinyVaeInit = Literal["responsive", "default"]
NonFinite = Literal["nan", "inf"]


class NonFiniteLatentsError(ValueError):
    """Latents to decode hold NaN or inf (a diverged rollout): no video to score. ``kinds`` per batch row."""

    def __init__(self, kinds: list[NonFinite | None]) -> None:
        self.kinds = kinds
        rows = ", ".join(f"{i} ({k})" for i, k in enumerate(kinds) if k is not None)
        super().__init__(f"latents of batch rows {rows} are not finite: a diverged rollout, not decoded")


def nonfinite_kinds(latents: Tensor) -> list[NonFinite | None]:
    """Per batch row of ``latents`` [B, ...]: "nan" when it holds a NaN, else "inf" when it holds an
    infinity, else None (finite)."""
    flat = latents.detach().reshape(latents.shape[0], -1)
    nan, inf = torch.isnan(flat).any(dim=1).tolist(), torch.isinf(flat).any(dim=1).tolist()
    return ["nan" if n else "inf" if i else None for n, i in zip(nan, inf, strict=True)]


# (seed, z_dim) -> (weights after `init_responsive_decoder`, torch's CPU random state after that build); filled by
# `tiny_wan_vae`, whose calibration decodes five samples (seconds of CPU per build; the tests build the same few hundreds of times)
_RESPONSIVE_DECODERS: dict[tuple[int, int], tuple[dict[str, Tensor], Tensor]] = {}


def tiny_wan_vae(seed: int = 0, z_dim: int = 16, init: TinyVaeInit = "responsive") -> AutoencoderKLWan:
    """Small random ``AutoencoderKLWan`` (base_dim 8, one res block per level).

    ``init="responsive"`` re-initialises the decoder with :func:`init_responsive_decoder` (seeded by
    ``seed``; see the module docstring); ``"default"`` keeps diffusers' initialisation, whose decoder
    maps every latent to nearly the same frame. A responsive build is calibrated once per process and
    (seed, z_dim): later builds load the stored weights into a new model and leave torch's random state
    where the first build left it, so they are the same model, bit for bit, with the same random draws after.
    """
    # its module, not the package: mypy reads diffusers/__init__ as giving its torch-less placeholder class
    from diffusers.models.autoencoders.autoencoder_kl_wan import AutoencoderKLWan

    if init not in get_args(TinyVaeInit):
        raise ValueError(f"init must be 'responsive' or 'default', got {init!r}")
    torch.manual_seed(seed)
    vae = AutoencoderKLWan(base_dim=8, z_dim=z_dim, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                           temperal_downsample=[False, True, True],
                           latents_mean=[0.0] * z_dim, latents_std=[1.0] * z_dim)
    if init == "responsive":
        stored = _RESPONSIVE_DECODERS.get((seed, z_dim))
        if stored is None:
            init_responsive_decoder(vae, torch.Generator().manual_seed(seed + 1))
            stored = ({k: v.detach().clone() for k, v in vae.state_dict().items()}, torch.get_rng_state())
            _RESPONSIVE_DECODERS[(seed, z_dim)] = stored
        else:
            vae.load_state_dict(stored[0])
            torch.set_rng_state(stored[1])
    return vae.eval().requires_grad_(False)


def _captured(vae: AutoencoderKLWan, module: torch.nn.Module, z: Tensor, *, inputs: bool) -> Tensor:
    """The input (``inputs``) or output of ``module`` while ``vae`` decodes ``z``, frames concatenated."""
    seen: list[Tensor] = []
    if inputs:
        hook = module.register_forward_pre_hook(lambda _m, args: seen.append(args[0].detach()))
    else:
        hook = module.register_forward_hook(lambda _m, _args, out: seen.append(out.detach()))
    try:
        vae.decode(z)
    finally:
        hook.remove()
    return torch.cat(seen, dim=2)


@torch.no_grad()
def init_responsive_decoder(vae: AutoencoderKLWan, generator: torch.Generator, *, anchor: float = 16.0, contrast: float = 0.15,
                            residual_scale: float = 0.1, luma: float = 0.8) -> None:
    """Re-initialise an ``AutoencoderKLWan`` decoder in place so its frames follow the latents.

    Steps 1-5 of the module docstring. The two scales are calibrated on a seeded standard-normal
    latent ``z`` (4x4, 3 frames), so they do not depend on the random draw: ``anchor`` is the RMS of
    the constant feature at the output norm over the RMS of the feature change ``z`` causes there;
    ``contrast`` is the per-pixel standard deviation of the brightness change ``z`` causes (brightness
    = mean colour in [0, 1]). ``luma`` in [0, 1] pulls ``conv_out``'s colour rows towards their mean.
    Only for random test models: never call it on pretrained weights.
    """
    if anchor <= 0 or contrast <= 0 or not 0.0 <= residual_scale <= 1.0 or not 0.0 <= luma <= 1.0:
        raise ValueError(f"need anchor > 0, contrast > 0, residual_scale and luma in [0, 1]; got {anchor}, "
                         f"{contrast}, {residual_scale}, {luma}")
    from diffusers.models.autoencoders.autoencoder_kl_wan import (
        WanAttentionBlock,
        WanResample,
        WanResidualBlock,
    )

    dec = vae.decoder
    for conv in [vae.post_quant_conv, *dec.modules()]:
        if not isinstance(conv, torch.nn.Conv2d | torch.nn.Conv3d):
            continue
        w = conv.weight
        mix = torch.randn(w.shape[:2], generator=generator) / math.sqrt(w.shape[1])
        w.zero_()
        kh, kw = w.shape[-2] // 2, w.shape[-1] // 2  # spatial centre; causal 3D convs: last (current) frame
        if w.ndim == 5:
            w[:, :, -1, kh, kw] = mix.to(w.dtype)
        else:
            w[:, :, kh, kw] = mix.to(w.dtype)
        if conv.bias is not None:
            conv.bias.zero_()
    for block in dec.modules():
        if isinstance(block, WanResample) and block.mode == "upsample3d":
            w = block.time_conv.weight  # [2C, C, 3, 1, 1]: two output frames per input frame
            c = w.shape[1]
            w.zero_()
            for j in range(w.shape[0]):
                w[j, j % c, -1, 0, 0] = 1.0
        elif isinstance(block, WanResidualBlock):
            block.conv2.weight.mul_(residual_scale)
        elif isinstance(block, WanAttentionBlock):
            block.proj.weight.mul_(residual_scale)
    w, in_bias, out_bias = dec.conv_out.weight, dec.conv_in.bias, dec.conv_out.bias
    assert in_bias is not None and out_bias is not None  # Wan's causal convs always have one
    z = torch.randn(1, vae.config["z_dim"], 3, 4, 4, generator=generator).to(dtype=w.dtype, device=w.device)
    zero = torch.zeros_like(z)
    signal = _captured(vae, dec.norm_out, z, inputs=True)  # no bias anywhere yet: the feature change z causes
    bias = torch.randn(in_bias.shape, generator=generator).to(dtype=w.dtype, device=w.device)
    in_bias.copy_(bias)
    constant = _captured(vae, dec.norm_out, zero, inputs=True)
    in_bias.mul_(anchor * signal.pow(2).mean().sqrt() / constant.pow(2).mean().sqrt())
    w.copy_((1.0 - luma) * w + luma * math.sqrt(w.shape[0]) * w.mean(dim=0, keepdim=True))
    change = (_captured(vae, dec.conv_out, z, inputs=False) - _captured(vae, dec.conv_out, zero, inputs=False))
    w.mul_(2.0 * contrast / change.mean(dim=1).std())  # brightness = (mean colour + 1) / 2
    # centre: the zero latent decodes (before the clamp) to mean 0 per colour, i.e. mid-grey
    out_bias.sub_(_captured(vae, dec.conv_out, zero, inputs=False).mean(dim=(0, 2, 3, 4)))


def vae_scale_factors(vae: AutoencoderKLWan) -> tuple[int, int]:
    """(temporal, spatial) compression of an ``AutoencoderKLWan``: what its encoder applies
    (`policy.shapes.vae_compression`), not the config's ``scale_factor_*`` fields."""
    from policy.shapes import vae_compression

    return vae_compression(vae.config)


def _stats(vae: AutoencoderKLWan, like: Tensor) -> tuple[Tensor, Tensor]:
    z = vae.config["z_dim"]
    mean = torch.tensor(vae.config["latents_mean"], dtype=torch.float32, device=like.device).view(1, z, 1, 1, 1)
    std = torch.tensor(vae.config["latents_std"], dtype=torch.float32, device=like.device).view(1, z, 1, 1, 1)
    return mean, std


def images_to_tensor(images: np.ndarray | Tensor) -> Tensor:
    """uint8 [B, H, W, 3] -> float32 [B, 3, 1, H, W] in [-1, 1] (checked)."""
    t = torch.as_tensor(images)
    if t.dtype != torch.uint8 or t.ndim != 4 or t.shape[-1] != 3:
        raise ValueError(f"images must be uint8 [B, H, W, 3], got {t.dtype} {tuple(t.shape)}")
    return (t.permute(0, 3, 1, 2).float() / 127.5 - 1.0).unsqueeze(2)


@torch.no_grad()
def encode_first_frames(vae: AutoencoderKLWan, images: np.ndarray | Tensor) -> Tensor:
    """uint8 [B, H, W, 3] -> normalised latent [B, C, 1, H/s, W/s] (float32, distribution mode)."""
    _, spatial = vae_scale_factors(vae)
    pix = images_to_tensor(images)
    h, w = pix.shape[-2:]
    if h % spatial or w % spatial:
        raise ValueError(f"image size {h}x{w} must be divisible by the VAE's spatial factor {spatial}")
    lat = latent_mode(vae, pix)
    mean, std = _stats(vae, lat)
    return (lat - mean) / std


def latent_mode(vae: AutoencoderKLWan, pixels: Tensor) -> Tensor:
    """The mode of ``vae``'s latent distribution of ``pixels`` [B, 3, T, H, W] in [-1, 1] (on the VAE's device and
    dtype), float32 and not normalised."""
    param = next(vae.parameters())
    out = cast("AutoencoderKLOutput", vae.encode(pixels.to(device=param.device, dtype=param.dtype)))  # return_dict
    return out.latent_dist.mode().float()


@torch.no_grad()
def decode_latents(vae: AutoencoderKLWan, latents: Tensor) -> np.ndarray:
    """Normalised latent [B, C, F, H, W] -> uint8 frames [B, T, H*s, W*s, 3] (numpy);
    :class:`NonFiniteLatentsError` when a row holds NaN or inf."""
    if latents.ndim != 5 or latents.shape[1] != (z_dim := vae.config["z_dim"]):
        raise ValueError(f"latents must be [B, {z_dim}, F, H, W], got {tuple(latents.shape)}")
    kinds = nonfinite_kinds(latents)
    if any(kinds):
        raise NonFiniteLatentsError(kinds)
    mean, std = _stats(vae, latents)
    param = next(vae.parameters())
    z = (latents.float() * std + mean).to(device=param.device, dtype=param.dtype)
    video = cast("DecoderOutput", vae.decode(z)).sample.float()  # [B, 3, T, H, W] in ~[-1, 1] (return_dict)
    frames = ((video.clamp(-1, 1) + 1.0) * 127.5).round().to(torch.uint8)
    return frames.permute(0, 2, 3, 4, 1).cpu().numpy()
