"""Wan 2.1 I2V-14B layout: channel-concat image conditioning and the CLIP image branch.

Read from diffusers' ``WanImageToVideoPipeline`` (0.42, ``expand_timesteps=False``, the 14B mode):

* ``prepare_latents`` builds a ``condition`` [B, T + C, F, H, W] once per prompt: a mask of T =
  ``vae_scale_factor_temporal`` channels (the per-pixel-frame mask, 1 on the given image's frame and 0 on
  the others, with the first pixel frame repeated T times and folded into T channels per latent frame: so
  all T channels are 1 on latent frame 0 and 0 elsewhere), then the normalised VAE latent of the video
  ``[image, 0, ..., 0]`` (the image followed by ``num_frames - 1`` mid-grey frames, encoded whole: the
  zero frames do not encode to zero latents);
* every transformer call gets ``cat([latents, condition], dim=1)`` (hence ``in_channels`` = 2 C + T = 36
  for the 16-channel Wan 2.1 VAE) and one timestep per sample (``t.expand(B)``), not per token;
* Wan 2.1 only (``image_dim`` set): ``encode_image`` runs ``CLIPVisionModel`` on the
  ``CLIPImageProcessor`` output and passes ``hidden_states[-2]`` as ``encoder_hidden_states_image`` to every
  call, conditional and unconditional branch alike.

Here (`policy.wan.wan_velocity` with ``condition``) the condition is built in ``encode_prompts`` and kept on
the `Conditioning`, so the rollout and the update's log-prob recomputation feed the same tensors and the
ratio is exact. Decisions where the issue was silent:

* The project's conditioning-frame convention stays: latent frame 0 is pinned to the clean first-frame
  latent and gets velocity 0 (no likelihood), as for TI2V. The pipeline instead lets the model denoise
  frame 0 too (guided by the mask and the condition to reproduce the image); the timestep stays the
  pipeline's per-sample one, so the model is called as it was trained, only with frame 0 already clean.
* CLIP preprocessing is torch (no PIL / torchvision) and follows the folder's
  ``image_processor/preprocessor_config.json`` step by step as ``CLIPImageProcessor`` does
  (`policy.clip_preprocess`); not bit-exact (resize rounding). The encoder loads in
  the run's ``torch_dtype`` (diffusers' Wan 2.1 example loads it in float32). It is the other prompt encoder and
  is placed like the text encoder (training/models.py): resident with it, or moved to the device only while
  prompts are encoded with ``text_encoder: offload``; ``training.generate`` moves both off before sampling.
* Wan 2.2 A14B (a ``transformer_2`` low-noise expert switched in below ``boundary_ratio``) is refused
  (`two_expert_problem`): this trainer trains one transformer, and the high-noise expert alone would
  sample the low-noise steps it was not trained for. Without ``model_index.json`` and ``transformer_2/`` (one
  expert copied out) the transformer config still tells it (`expert_layout_problem`): both experts have the
  I2V channel layout and no CLIP branch (``image_dim`` null), while Wan 2.1 I2V-14B always has one (1280);
  diffusers' pipeline likewise gives image embeddings to Wan 2.1 transformers only. An I2V-layout model without
  CLIP that is not a Wan 2.2 expert would be refused too; none is known.
* A text-to-video checkpoint (Wan 2.1 T2V 1.3B / 14B) has the TI2V channel layout (``in_channels`` =
  ``out_channels`` = the VAE's ``z_dim``, no image branch) but was never trained to continue a clean first
  latent frame at timestep 0; it is refused (`text_to_video_problem`) by what its ``model_index.json`` says:
  diffusers' conversion script saves Wan 2.2 TI2V-5B as ``WanPipeline(expand_timesteps=True)`` (the mode that
  pins frame 0 and gives its tokens timestep 0) and Wan 2.1 T2V as a plain ``WanPipeline`` (``expand_timesteps``
  false, or no such key in older conversions). A folder without ``model_index.json`` (a transformer copied out),
  or a hub id's that the HF cache lacks with the hub not reached (a warning says so), is not judged; one that
  is there but cannot be read, or that the hub answers with an error, stops the load (`read_model_index`). A
  transformer config alone does not tell Wan 2.1 T2V from a TI2V layout on the same latent
  (Wan 2.2 TI2V-5B differs only in using the 48-channel Wan 2.2 VAE, and this project's tiny test models have
  the TI2V layout on a 16-channel VAE).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
from torch import Tensor

from policy.checkpoint import CheckpointFileUnreachable, load_checkpoint_json
from policy.clip_preprocess import ClipPreprocess
from policy.shapes import wan_channels
from policy.vae import _stats, images_to_tensor, latent_mode, vae_scale_factors

if TYPE_CHECKING:  # pragma: no cover
    from diffusers.models.autoencoders.autoencoder_kl_wan import AutoencoderKLWan  # as policy/vae.py


def concat_channels(transformer_config: Mapping[str, Any], z_dim: int, temporal: int) -> int:
    """How many condition channels the transformer with this diffusers config (`policy.diffusers_model.model_config`)
    takes after the ``z_dim`` latent: 0 (TI2V) or ``temporal + z_dim`` (I2V-14B); ValueError for any other
    ``in_channels``."""
    c_in = int(transformer_config["in_channels"])
    if c_in == z_dim:
        return 0
    if c_in == 2 * z_dim + temporal:
        return temporal + z_dim
    raise ValueError(f"transformer in_channels {c_in} fits neither the TI2V layout (VAE z_dim {z_dim}) nor the "
                     f"I2V-14B one (2 x z_dim + {temporal} mask channels = {2 * z_dim + temporal})")


def condition_mask(batch: int, num_frames: int, temporal: int, size: tuple[int, int]) -> Tensor:
    """[B, T, F, H, W] mask of ``prepare_latents`` for one given (first) image: the pixel-frame mask (1 on
    frame 0) with frame 0 repeated ``temporal`` times, folded into ``temporal`` channels per latent frame."""
    h, w = size
    pix = torch.zeros(batch, 1, num_frames, h, w)
    pix[:, :, 0] = 1
    pix = torch.cat([pix[:, :, :1].repeat_interleave(temporal, dim=2), pix[:, :, 1:]], dim=2)
    return pix.view(batch, -1, temporal, h, w).transpose(1, 2)


@torch.no_grad()
def image_condition(vae: AutoencoderKLWan, images: np.ndarray | Tensor, num_frames: int) -> Tensor:
    """uint8 [B, H, W, 3] first frames -> the pipeline's ``condition`` [B, T + C, F, H/s, W/s] (float32):
    mask channels, then the normalised latent of ``[image, 0 x (num_frames - 1)]`` (distribution mode)."""
    temporal, spatial = vae_scale_factors(vae)
    if (num_frames - 1) % temporal:
        raise ValueError(f"num_frames {num_frames} must be 1 + a multiple of the VAE's temporal factor {temporal}")
    first = images_to_tensor(images)  # [B, 3, 1, H, W]
    b, _, _, h, w = first.shape
    video = torch.cat([first, first.new_zeros(b, 3, num_frames - 1, h, w)], dim=2)
    lat = latent_mode(vae, video)
    mean, std = _stats(vae, lat)
    lat = (lat - mean) / std
    mask = condition_mask(b, num_frames, temporal, (h // spatial, w // spatial)).to(lat.device)
    return torch.cat([mask, lat], dim=1)


class ClipImageEncoder:
    """Wan 2.1's image branch: ``CLIPVisionModel`` penultimate hidden states of the preprocessed first frame."""

    def __init__(self, model: torch.nn.Module, processor: Mapping[str, Any]) -> None:
        self.model = model.eval().requires_grad_(False)
        self.steps = ClipPreprocess.from_config(processor)

    def preprocess(self, images: np.ndarray | Tensor) -> Tensor:
        """uint8 [B, H, W, 3] -> pixel values [B, 3, h, w] as the folder's ``CLIPImageProcessor`` config makes
        them (`policy.clip_preprocess`)."""
        return self.steps(images)

    @torch.no_grad()
    def encode(self, images: np.ndarray | Tensor, *, device: torch.device | str, dtype: torch.dtype) -> Tensor:
        """[B, N, D] ``hidden_states[-2]`` (what ``WanImageToVideoPipeline.encode_image`` returns)."""
        param = next(self.model.parameters())
        pix = self.preprocess(images).to(device=param.device, dtype=param.dtype)
        out = self.model(pixel_values=pix, output_hidden_states=True)
        return out.hidden_states[-2].to(device=device, dtype=dtype)

    def to(self, *args, **kwargs) -> ClipImageEncoder:
        self.model.to(*args, **kwargs)
        return self

    @classmethod
    def from_pretrained(cls, root: str | Path, *, torch_dtype: torch.dtype = torch.bfloat16,
                        revision: str | None = None) -> ClipImageEncoder:
        """``image_encoder/`` (``CLIPVisionModel``) and ``image_processor/`` (its config only) of a folder or hub
        id; weights missing from the encoder are refused (`policy.checkpoint.require_all_weights`)."""
        from transformers import CLIPVisionModel
        from transformers.image_processing_utils import ImageProcessingMixin

        from policy.checkpoint import require_all_weights

        loaded = CLIPVisionModel.from_pretrained(str(root), subfolder="image_encoder", torch_dtype=torch_dtype,
                                                 revision=revision or "main", output_loading_info=True)
        # transformers types from_pretrained as the model alone; output_loading_info=True returns (model, info)
        model, info = cast(tuple[CLIPVisionModel, dict[str, Any]], loaded)
        require_all_weights(info, f"{root}/image_encoder")
        processor, _ = ImageProcessingMixin.get_image_processor_dict(str(root), subfolder="image_processor",
                                                                     revision=revision)
        return cls(model, processor)


def read_model_index(root: str | Path, revision: str | None = None) -> dict[str, Any]:
    """The checkpoint's ``model_index.json`` (a local folder's file, or a hub id's through diffusers'
    ``DiffusionPipeline.load_config`` at ``revision``) as a dict; {} when it has none: the checks below then judge
    by the transformer config alone (nothing is guessed from a missing index). {} too, with a warning, for a hub
    id whose index is not in the HF cache with the hub not reached (`policy.checkpoint.CheckpointFileUnreachable`:
    an offline cache of the weights alone loads as it did). `policy.checkpoint.CheckpointFileUnreadable` for one
    that is there but is no JSON object, or that the hub answered with an error: read as {}, the text-to-video and
    two-expert refusals were skipped in silence."""

    def load_config(*args: Any, **kwargs: Any) -> Any:
        from diffusers import DiffusionPipeline

        return DiffusionPipeline.load_config(*args, **kwargs)

    try:
        return load_checkpoint_json(root, None, "model_index.json", revision, load_config) or {}
    except CheckpointFileUnreachable as exc:
        warnings.warn(f"{exc}; the text-to-video and Wan 2.2 two-expert checks judge by the transformer config "
                      "alone", stacklevel=2)
        return {}


def two_expert_problem(index: Mapping[str, Any], root: Path | None = None) -> str | None:
    """Why a checkpoint whose ``model_index.json`` is ``index`` (`read_model_index`), or a local folder ``root``
    with a ``transformer_2/`` folder, is a Wan 2.2 A14B two-expert checkpoint this trainer refuses (module
    docstring), or None."""
    second = index.get("transformer_2")
    has_second = (root is not None and (root / "transformer_2").is_dir()) or (isinstance(second, list) and any(second))
    if not has_second and index.get("boundary_ratio") is None:
        return None
    return (f"Wan 2.2 A14B's two experts (transformer_2, boundary_ratio {index.get('boundary_ratio')}) are not "
            "supported: this trainer trains one transformer, and the high-noise expert alone would sample the "
            "low-noise steps; use a Wan 2.1 I2V-14B or Wan 2.2 TI2V-5B checkpoint")


def text_to_video_problem(index: Mapping[str, Any], transformer_config: Mapping[str, Any]) -> str | None:
    """Why a Wan checkpoint with this ``model_index.json`` (``index``; {} when it has none) and transformer config (not
    judged when {}) is a text-to-video model this image-to-video trainer refuses, or None (module docstring): the
    TI2V channel layout (``in_channels`` = ``out_channels``) without the pipeline's ``expand_timesteps`` true."""
    c_in, c_out = wan_channels(transformer_config)
    if not index or not transformer_config or c_in is None or c_in != c_out or index.get("expand_timesteps") is True:
        return None
    found = f"expand_timesteps {json.dumps(index['expand_timesteps'])}" if "expand_timesteps" in index \
        else "no expand_timesteps"
    return (f"a text-to-video checkpoint: model_index.json's {index.get('_class_name')} has {found}, and the "
            f"transformer takes no image condition (in_channels = out_channels = {c_in}), as Wan 2.1 T2V; this "
            "image-to-video trainer needs Wan 2.2 TI2V (expand_timesteps true: trained to continue a clean first "
            "latent frame) or Wan 2.1 I2V-14B (in_channels 2 x VAE z_dim + 4 mask channels, an image_dim)")


def expert_layout_problem(transformer_config: Mapping[str, Any]) -> str | None:
    """Why a Wan transformer config is a Wan 2.2 A14B expert (module docstring), or None: more input than output
    channels (the channel-concat image condition, as `policy.shapes.wan_channels` reads them) and no CLIP branch."""
    c_in, c_out = wan_channels(transformer_config)
    if not isinstance(c_in, int) or not isinstance(c_out, int) or c_in <= c_out:
        return None
    if transformer_config.get("image_dim") is not None:
        return None
    return (f"transformer in_channels {c_in} (out_channels {c_out}: a channel-concat image condition) with no CLIP "
            "branch (image_dim null): a Wan 2.2 A14B expert, whose two experts are not supported: this trainer "
            "trains one transformer, and one expert alone would sample the other's steps (Wan 2.1 I2V-14B has "
            "image_dim set); use a Wan 2.1 I2V-14B or Wan 2.2 TI2V-5B checkpoint")
