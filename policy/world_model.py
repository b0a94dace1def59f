"""The video world model as a flow-matching policy (DESIGN.md §5).

:class:`FlowWorldModel` wraps a diffusers transformer (``CosmosTransformer3DModel`` for
Cosmos-Predict2.5, ``WanTransformer3DModel`` for Wan 2.2 TI2V and Wan 2.1 I2V-14B) and exposes one convention for
every backend: ``velocity(x_t, sigma, cond) -> v`` with ``x_t = (1 - s) x0 + s eps`` and
``v = eps - x0`` (backend details in ``policy/cosmos.py`` and ``policy/wan.py``).

Decisions where the issue was silent:

* Conditioning frames (``cond.cond_mask == 0``) take the encoded first-frame latent (Image2World:
  one conditioning latent frame) both in the transformer input (first-frame replacement) and in
  the returned velocity, which is 0 there: an Euler or DynDiff step leaves them unchanged.
* Only the transformer is a registered sub-module, so ``parameters()`` / ``state_dict()`` /
  DeepSpeed see the trainable network alone; the VAE and the text (and CLIP) encoders are frozen helpers
  that follow ``.to(device, dtype)``, ``.cpu()``, ``.cuda()``, ``.float()``, ``.half()`` and ``.bfloat16()``
  of this module, but the text and CLIP encoders not a move of a module that holds this one (DeepSpeed's
  ``.to(device)`` of its wrapper), deliberately: with ``text_encoder: offload`` they stay in host memory
  (`policy.frozen.FrozenHelpersModule` says how).
* ``decode`` returns numpy uint8 [B, T, H, W, 3] (what the reward tools take).
* Classifier-free guidance is optional (``velocity(..., guidance_scale=w)``, default 1 = off, one
  transformer pass): with w != 1 the conditional and the negative-prompt branch run as one pass over
  the doubled batch, so a ZeRO-3 forward still gathers the parameters once.
* One guidance convention for both backends, ``v = v_neg + w (v_cond - v_neg)`` (:func:`guided_velocity`):
  Wan's (``WanImageToVideoPipeline``: ``noise_uncond + guidance_scale * (noise_pred - noise_uncond)``), so a Wan
  ``guidance_scale`` is w as it is. Cosmos' pipelines (``Cosmos2_5_PredictBasePipeline``, and
  ``Cosmos2VideoToWorldPipeline`` on its x0 predictions, the same combination since v is linear in x0) write
  ``v_cond + g (v_cond - v_neg)``: their ``guidance_scale`` g is w = g + 1 here (Cosmos-Predict2.5's default 7.0
  is w = 8.0). Neither pipeline guides at a scale <= 1 (Cosmos' g <= 1 is w = 1 here); here any w != 1 is applied
  as written. Decision: one meaning of ``guidance_scale`` across backends (a config, a sweep and a comparison of
  backends read the same number the same way) rather than each pipeline's own; the mapping is the caller's,
  said here, in ``training.config.TrainConfig.guidance_scale`` and in the README, and checked against both
  pipelines in tests/test_pipeline_parity.py.
* ``encode_prompts`` takes ``num_frames`` (pixel frames of the clip to generate; default
  ``default_num_frames``, which is the model family's own unless given: `policy.shapes.native_num_frames`)
  because the conditioning mask needs the latent frame count.
* Wan 2.1 I2V-14B (``policy/wan_i2v.py``): ``encode_prompts`` adds the pipeline's channel-concat condition and
  the CLIP image embeddings to the `Conditioning` (its ``image_condition`` / ``image_embeds``), which every
  transformer call feeds, so a rollout and its recomputation see the same inputs. The CLIP encoder is a frozen
  helper like the text encoder (it follows ``.to``); ``from_pretrained`` loads it with the text encoder unless
  ``load_image_encoder`` says otherwise.
* Tiny models (``tiny_cosmos`` / ``tiny_wan``): the real transformer and VAE classes with a few
  small random layers, and a :class:`~policy.text.HashTextEncoder` instead of a language model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
import torch
from torch import Tensor

from policy.checkpoint import (
    check_backend,
    check_checkpoint_folder,
    check_clip_parts,
    check_transformer_class,
    require_all_weights,
)
from policy.conditioning import Conditioning, make_cond_mask
from policy.cosmos import TINY_COSMOS, build_cosmos_transformer, cosmos_text_dim, cosmos_velocity
from policy.diffusers_model import model_config, model_dtype
from policy.frozen import FrozenHelpers, FrozenHelpersModule
from policy.shapes import clip_latent_size, native_num_frames
from policy.text import HashTextEncoder, TextEncoder
from policy.vae import decode_latents, encode_first_frames, tiny_wan_vae, vae_scale_factors
from policy.wan import NUM_TRAIN_TIMESTEPS, TINY_WAN, build_wan_transformer, wan_velocity
from policy.wan_i2v import (
    ClipImageEncoder,
    concat_channels,
    expert_layout_problem,
    image_condition,
    read_model_index,
    text_to_video_problem,
    two_expert_problem,
)

if TYPE_CHECKING:  # pragma: no cover
    from diffusers.models.autoencoders.autoencoder_kl_wan import AutoencoderKLWan  # as policy/vae.py

Backend = Literal["cosmos", "wan"]


def check_guidance_scale(scale: float) -> None:
    """ValueError unless the guidance weight w is a finite number >= 0 (module docstring: 1 = off)."""
    if not (scale >= 0 and math.isfinite(scale)):
        raise ValueError(f"guidance_scale must be a finite number >= 0, got {scale}")


def guided_velocity(v_cond: Tensor, v_uncond: Tensor, scale: float) -> Tensor:
    """Classifier-free guidance on the velocity field: ``v = v_uncond + w (v_cond - v_uncond)``
    (w = 1: the conditional velocity; w = 0: the unconditional one)."""
    return v_uncond + scale * (v_cond - v_uncond)


def _twice(t: Tensor | None) -> Tensor | None:
    """``t`` stacked on itself along the batch (None stays None)."""
    return None if t is None else torch.cat([t, t])


class FlowWorldModel(FrozenHelpersModule):
    """A diffusers video transformer as a rectified-flow velocity field, plus its VAE and text encoder."""

    def __init__(
        self,
        backend: Backend,
        transformer: torch.nn.Module,
        vae: AutoencoderKLWan | None = None,
        text_encoder: TextEncoder | None = None,
        *,
        image_encoder: ClipImageEncoder | None = None,
        cond_frame_sigma: float = 1e-4,
        num_train_timesteps: int = NUM_TRAIN_TIMESTEPS,
        default_num_frames: int | None = None,
    ) -> None:
        super().__init__()
        if backend not in ("cosmos", "wan"):
            raise ValueError(f"backend must be 'cosmos' or 'wan', got {backend!r}")
        self.backend: Backend = backend
        self.transformer = transformer
        # Frozen helpers kept outside the module tree (policy/frozen.py).
        self._frozen = FrozenHelpers(vae=vae, text_encoder=text_encoder, image_encoder=image_encoder)
        if vae is not None:
            vae.eval().requires_grad_(False)
        self.cond_frame_sigma = cond_frame_sigma
        self.num_train_timesteps = num_train_timesteps
        # None: the family's own clip length (policy.shapes.native_num_frames)
        self.default_num_frames = native_num_frames(backend, model_config(transformer)) if default_num_frames is None \
            else default_num_frames

    # ------------------------------------------------------------------ velocity
    def velocity(self, x_t: Tensor, sigma: Tensor | float, cond: Conditioning, guidance_scale: float = 1.0) -> Tensor:
        """Rectified-flow velocity ``v = eps - x0`` at ``x_t`` [B, C, F, H, W], noise level ``sigma`` [B].

        Conditioning frames are replaced by ``cond.first_frame_latent`` before the forward and get
        ``v = 0``. Returns float32. With ``guidance_scale`` w != 1, classifier-free guidance
        (:func:`guided_velocity`) from one transformer pass over the batch doubled with
        ``cond.negative_text_embeds`` (required then).
        """
        if x_t.ndim != 5:
            raise ValueError(f"x_t must be [B, C, F, H, W], got {tuple(x_t.shape)}")
        check_guidance_scale(guidance_scale)
        b, c, f, h, w = x_t.shape
        ff = cond.first_frame_latent
        if ff.shape[0] != b or ff.shape[1] != c or ff.shape[3:] != (h, w) or cond.num_latent_frames != f:
            raise ValueError(f"conditioning (first frame {tuple(ff.shape)}, {cond.num_latent_frames} frames) "
                             f"does not match latent {tuple(x_t.shape)}")
        s = torch.as_tensor(sigma, dtype=torch.float32, device=x_t.device)
        s = s.expand(b) if s.ndim == 0 else s
        if s.shape != (b,):
            raise ValueError(f"sigma must be a scalar or [B={b}], got {tuple(s.shape)}")
        keep = cond.cond_mask.to(device=x_t.device, dtype=torch.float32)
        x_in = keep * x_t.float() + (1.0 - keep) * ff.to(x_t.device).float()
        text = cond.text_embeds.to(x_t.device)
        image = (cond.image_condition, cond.image_embeds)
        if guidance_scale == 1.0:
            return self._forward(x_in, s, keep, text, image) * keep
        if cond.negative_text_embeds is None:
            raise ValueError(f"guidance_scale {guidance_scale} needs negative text embeddings "
                             "(encode_prompts(..., negative_prompt=...))")
        both = torch.cat([text, cond.negative_text_embeds.to(x_t.device)])
        image = (_twice(image[0]), _twice(image[1]))  # both branches: the same image
        v = self._forward(torch.cat([x_in, x_in]), torch.cat([s, s]), torch.cat([keep, keep]), both, image)
        return guided_velocity(v[:b], v[b:], guidance_scale) * keep

    def _forward(self, x_in: Tensor, s: Tensor, keep: Tensor, text: Tensor,
                 image: tuple[Tensor | None, Tensor | None]) -> Tensor:
        if self.backend == "cosmos":
            return cosmos_velocity(self.transformer, x_in, s, keep, text, cond_frame_sigma=self.cond_frame_sigma)
        return wan_velocity(self.transformer, x_in, s, keep, text, num_train_timesteps=self.num_train_timesteps,
                            condition=image[0], image_embeds=image[1])

    # ------------------------------------------------------------------ shapes and codecs
    def latent_shape(self, num_frames: int, height: int, width: int) -> tuple[int, int, int, int]:
        """(C, F, H, W) of the latent of a ``num_frames`` x ``height`` x ``width`` clip this model can
        generate; ValueError naming each setting that does not fit the VAE's compression, the
        transformer's patch size or the conditioning frame (`policy.shapes.clip_latent_size`)."""
        if self.vae is None:
            raise RuntimeError("latent_shape needs the VAE (this model was built without one)")
        temporal, spatial = vae_scale_factors(self.vae)
        patch = tuple(model_config(self.transformer)["patch_size"])
        f, h, w = clip_latent_size(num_frames, height, width, temporal=temporal, spatial=spatial, patch=patch)
        return int(model_config(self.vae)["z_dim"]), f, h, w

    @torch.no_grad()
    def encode_prompts(self, images: np.ndarray | Tensor, texts: Sequence[str], *,
                       num_frames: int | None = None, num_cond_frames: int = 1,
                       negative_prompt: str | None = None) -> Conditioning:
        """First frames uint8 [B, H, W, 3] + texts -> :class:`Conditioning` for a ``num_frames`` clip;
        with ``negative_prompt`` (e.g. "" ) also its features, for classifier-free guidance."""
        if self.vae is None or self.text_encoder is None:
            raise RuntimeError("encode_prompts needs the VAE and the text encoder")
        if num_cond_frames != 1:  # one image gives one latent frame; more would pin copies of it silently
            raise ValueError(f"num_cond_frames must be 1 (the conditioning is one image), got {num_cond_frames}")
        if len(texts) != len(images):
            raise ValueError(f"{len(images)} images but {len(texts)} texts")
        n = self.default_num_frames if num_frames is None else num_frames
        h, w = int(images.shape[1]), int(images.shape[2])
        _, f, _, _ = self.latent_shape(n, h, w)
        device = next(self.transformer.parameters()).device
        first = encode_first_frames(self.vae, images).to(device)
        text = self.text_encoder.encode(list(texts), device=device, dtype=model_dtype(self.transformer))
        negative = None
        if negative_prompt is not None:
            negative = self.text_encoder.encode([negative_prompt] * len(texts), device=device,
                                                dtype=model_dtype(self.transformer))
        image, embeds = None, None
        if self.backend == "wan" and concat_channels(model_config(self.transformer), first.shape[1],
                                                     vae_scale_factors(self.vae)[0]):
            image = image_condition(self.vae, images, n).to(device)
        if self.backend == "wan" and model_config(self.transformer)["image_dim"] is not None:
            if self.image_encoder is None:
                raise RuntimeError("this transformer has a CLIP image branch (image_dim) but the model has no "
                                   "image encoder (load it: from_pretrained(..., load_image_encoder=True))")
            embeds = self.image_encoder.encode(images, device=device, dtype=model_dtype(self.transformer))
        return Conditioning(first, text, make_cond_mask(len(texts), f, num_cond_frames, device=device), negative,
                            image, embeds)

    @torch.no_grad()
    def decode(self, latents: Tensor) -> np.ndarray:
        """Normalised latents [B, C, F, H, W] -> uint8 frames [B, T, H, W, 3] (numpy)."""
        if self.vae is None:
            raise RuntimeError("decode needs the VAE (this model was built without one)")
        return decode_latents(self.vae, latents)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def tiny_cosmos(cls, seed: int = 0, default_num_frames: int = 9) -> FlowWorldModel:
        """Random tiny ``CosmosTransformer3DModel`` + tiny ``AutoencoderKLWan`` (responsive decoder) + hash text."""
        tr = build_cosmos_transformer(TINY_COSMOS, seed)
        text = HashTextEncoder(seq_len=8, dim=cosmos_text_dim(tr))
        return cls("cosmos", tr, tiny_wan_vae(seed), text, default_num_frames=default_num_frames)

    @classmethod
    def tiny_wan(cls, seed: int = 0, default_num_frames: int = 9) -> FlowWorldModel:
        """Random tiny ``WanTransformer3DModel`` + tiny ``AutoencoderKLWan`` (responsive decoder) + hash text."""
        tr = build_wan_transformer(TINY_WAN, seed)
        text = HashTextEncoder(seq_len=8, dim=int(tr.config.text_dim))
        return cls("wan", tr, tiny_wan_vae(seed), text, default_num_frames=default_num_frames)

    @classmethod
    def from_pretrained(cls, path: str | Path, backend: Backend, *, torch_dtype: torch.dtype = torch.bfloat16,
                        load_vae: bool = True, load_text_encoder: bool = True, load_image_encoder: bool | None = None,
                        transformer_subfolder: str = "transformer", default_num_frames: int | None = None,
                        revision: str | None = None, transformer: torch.nn.Module | None = None) -> FlowWorldModel:
        """Load a diffusers-layout checkpoint folder (or hub id, when the hub is reachable).

        Cosmos-Predict2.5 (e.g. ``nvidia/Cosmos-Predict2.5-2B``, ``transformer_subfolder`` per the
        repository's layout): ``CosmosTransformer3DModel``, ``AutoencoderKLWan`` (``vae``) and the
        Qwen2.5-VL text encoder (``text_encoder`` + ``tokenizer``). Wan 2.2 TI2V (e.g.
        ``Wan-AI/Wan2.2-TI2V-5B-Diffusers``): ``WanTransformer3DModel``, the Wan 2.2
        ``AutoencoderKLWan`` and UMT5. Wan 2.1 I2V-14B (``in_channels`` 36, ``image_dim``): also
        ``CLIPVisionModel`` (``image_encoder``) and the ``image_processor`` config (`policy.wan_i2v`); a Wan 2.2
        A14B two-expert folder and a text-to-video one (Wan 2.1 T2V: ``model_index.json`` without
        ``expand_timesteps`` true) are a ValueError; a ``model_index.json`` that is there but cannot be read, or
        that the hub answers with an error, is `policy.checkpoint.CheckpointFileUnreadable`
        (`policy.wan_i2v.read_model_index`). The VAE loads in float32. Untested here with real weights.

        Refuses (``policy.checkpoint``) an unknown backend before loading, a folder lacking a part it loads or
        its weights (FileNotFoundError naming it; the CLIP parts once the transformer config is read, before any
        weights load), a transformer of the other backend's class, and weights diffusers would leave randomly
        initialised (ValueError). ``revision`` (a branch, tag or commit of a hub id:
        Cosmos-Predict2.5 keeps its diffusers files on a branch) is passed to every part's loader; with a
        local folder, which has no revisions, it is a ValueError rather than silently ignored.

        ``transformer``: one already loaded (a full fine-tuning export's, training/export.py) takes the place of
        the checkpoint's, whose weights are then not read (its config still is: the class and layout checks);
        a transformer of another class is a ValueError.
        """
        from diffusers import AutoencoderKLWan, CosmosTransformer3DModel, WanTransformer3DModel

        from policy.text import CosmosQwenTextEncoder, WanT5TextEncoder

        check_backend(backend)
        check_checkpoint_folder(path, transformer_subfolder=transformer_subfolder, load_vae=load_vae,
                                load_text_encoder=load_text_encoder)
        root = str(Path(path).expanduser())
        if revision is not None and Path(root).is_dir():
            raise ValueError(f"revision {revision!r} is for hub ids, but {root!r} is a local folder")
        hub = {"revision": revision}
        tr_cls = CosmosTransformer3DModel if backend == "cosmos" else WanTransformer3DModel
        where = f"{root}/{transformer_subfolder}"
        tr_config = tr_cls.load_config(root, subfolder=transformer_subfolder, **hub)
        check_transformer_class(tr_config, backend, where)
        if backend == "wan":  # refused Wan families (policy/wan_i2v.py), before any weights load
            index = read_model_index(root, revision)
            folder = Path(root) if Path(root).is_dir() else None
            if problem := (two_expert_problem(index, folder) or expert_layout_problem(tr_config)
                           or text_to_video_problem(index, tr_config)):
                raise ValueError(f"{root}: {problem}")
        # Wan 2.1 I2V's CLIP branch; load_image_encoder None: with the text encoder (the prompt encoders)
        load_clip = (load_text_encoder if load_image_encoder is None else load_image_encoder) and \
            backend == "wan" and tr_config.get("image_dim") is not None
        if load_clip:  # before the weights load, as check_checkpoint_folder's parts (policy/checkpoint.py)
            check_clip_parts(root)
        if transformer is None:
            tr, info = tr_cls.from_pretrained(root, subfolder=transformer_subfolder, torch_dtype=torch_dtype,
                                              output_loading_info=True, **hub)
            require_all_weights(info, where)
        elif type(transformer) is not tr_cls:
            raise ValueError(f"the transformer given is a {type(transformer).__name__}, not the {tr_cls.__name__} "
                             f"of backend {backend!r}")
        else:
            tr = transformer
        vae = None
        if load_vae:
            vae, info = AutoencoderKLWan.from_pretrained(root, subfolder="vae", torch_dtype=torch.float32,
                                                         output_loading_info=True, **hub)
            require_all_weights(info, f"{root}/vae")
        text: TextEncoder | None = None
        if load_text_encoder:
            enc_cls = CosmosQwenTextEncoder if backend == "cosmos" else WanT5TextEncoder
            text = enc_cls.from_pretrained(root, torch_dtype=torch_dtype, revision=revision)
        clip = ClipImageEncoder.from_pretrained(root, torch_dtype=torch_dtype, revision=revision) if load_clip else None
        return cls(backend, tr, vae, text, image_encoder=clip, default_num_frames=default_num_frames)
