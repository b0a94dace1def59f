"""The policy's sampler against diffusers' own pipelines on tiny random models of the real classes: the
same noise, image, text features and sigmas give the same final latents (conditioning latent with the
VAE's latents_mean / latents_std, first-frame replacement, per-token / per-frame timesteps, dtype casts,
classifier-free guidance). A VAE with non-trivial latent statistics, so normalisation errors show."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch

H = W = 32
FRAMES, STEPS = 9, 3


def _vae():
    from diffusers import AutoencoderKLWan

    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    return AutoencoderKLWan(base_dim=8, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                            temperal_downsample=[False, True, True],
                            latents_mean=torch.randn(16, generator=g).tolist(),
                            latents_std=(torch.rand(16, generator=g) + 0.5).tolist()).eval()


def _ours(backend, transformer, vae, sched, emb, neg, noise, img, scale, monkeypatch):
    import policy.rollout as rollout
    from policy.conditioning import Conditioning, make_cond_mask
    from policy.vae import encode_first_frames
    from policy.world_model import FlowWorldModel

    sched.set_timesteps(STEPS)
    monkeypatch.setattr(rollout, "sigma_schedule", lambda n, s: sched.sigmas.clone())
    model = FlowWorldModel(backend, transformer, vae, None)
    cond = Conditioning(encode_first_frames(vae, img[None]), emb, make_cond_mask(1, noise.shape[2]), neg)
    return rollout.sample_ode(model, cond, STEPS, 3.0, noise=noise.clone(), guidance_scale=scale)


def _inputs(text_dim):
    g = torch.Generator().manual_seed(1)
    img = (torch.rand(H, W, 3, generator=g) * 255).to(torch.uint8).numpy()
    emb, neg = torch.randn(1, 8, text_dim, generator=g), torch.randn(1, 8, text_dim, generator=g)
    return img, emb, neg, torch.randn(1, 16, (FRAMES - 1) // 4 + 1, H // 8, W // 8, generator=g)


@pytest.mark.parametrize("scale", [1.0, 5.0])
def test_wan_matches_the_ti2v_pipeline(scale, monkeypatch):
    from diffusers import FlowMatchEulerDiscreteScheduler, WanImageToVideoPipeline
    from PIL import Image

    from policy.wan import TINY_WAN, build_wan_transformer

    vae, tr = _vae(), build_wan_transformer(TINY_WAN, 1).eval()
    sched = FlowMatchEulerDiscreteScheduler(shift=3.0)
    pipe = WanImageToVideoPipeline(tokenizer=None, text_encoder=None, vae=vae, scheduler=sched, transformer=tr,
                                   expand_timesteps=True)
    pipe.set_progress_bar_config(disable=True)
    img, emb, neg, noise = _inputs(TINY_WAN["text_dim"])
    ref = pipe(image=Image.fromarray(img), prompt_embeds=emb, negative_prompt_embeds=neg, height=H, width=W,
               num_frames=FRAMES, num_inference_steps=STEPS, guidance_scale=scale, latents=noise.clone(),
               output_type="latent").frames
    out = _ours("wan", tr, vae, sched, emb, neg, noise, img, scale, monkeypatch)
    assert torch.allclose(out, ref, atol=1e-5), (out - ref).abs().max()


@pytest.mark.parametrize(("pipe_scale", "our_scale"), [(1.0, 1.0), (3.0, 4.0)])  # its g is our w = g + 1
def test_cosmos_matches_the_predict2_5_pipeline(pipe_scale, our_scale, monkeypatch):
    import diffusers.models.transformers.transformer_cosmos as cosmos_model
    import diffusers.pipelines.cosmos.pipeline_cosmos2_5_predict as cosmos_pipeline
    import torch.nn.functional as fn
    from diffusers import CosmosTransformer3DModel, FlowMatchEulerDiscreteScheduler
    from PIL import Image

    from policy.cosmos import TINY_COSMOS

    # torchvision is not a dependency: stand-ins for the two calls these paths make (nearest resize of the
    # all-zero padding mask; PIL image -> [0, 1] tensor)
    resize = types.SimpleNamespace(resize=lambda x, size, interpolation=None: fn.interpolate(x, tuple(size)))
    monkeypatch.setattr(cosmos_model, "transforms", types.SimpleNamespace(
        functional=resize, InterpolationMode=types.SimpleNamespace(NEAREST="nearest")), raising=False)
    to_tensor = types.SimpleNamespace(to_tensor=lambda im: torch.tensor(np.asarray(im)).permute(2, 0, 1) / 255.0)
    monkeypatch.setattr(cosmos_pipeline, "torchvision", types.SimpleNamespace(
        transforms=types.SimpleNamespace(functional=to_tensor)), raising=False)
    monkeypatch.setattr(cosmos_pipeline.Cosmos2_5_PredictBasePipeline, "_execution_device", torch.device("cpu"))

    class Safety(torch.nn.Module):
        pass

    vae = _vae()
    torch.manual_seed(1)
    tr = CosmosTransformer3DModel(**dict(TINY_COSMOS, in_channels=17, concat_padding_mask=True)).eval()
    sched = FlowMatchEulerDiscreteScheduler(shift=3.0)
    pipe = cosmos_pipeline.Cosmos2_5_PredictBasePipeline(text_encoder=None, tokenizer=None, transformer=tr, vae=vae,
                                                         scheduler=sched, safety_checker=Safety())
    pipe.set_progress_bar_config(disable=True)
    img, emb, neg, noise = _inputs(TINY_COSMOS["crossattn_proj_in_channels"])
    ref = pipe(image=Image.fromarray(img), prompt_embeds=emb, negative_prompt_embeds=neg, height=H, width=W,
               num_frames=FRAMES, num_inference_steps=STEPS, guidance_scale=pipe_scale, latents=noise.clone(),
               output_type="latent", num_latent_conditional_frames=1).frames
    out = _ours("cosmos", tr, vae, sched, emb, neg, noise, img, our_scale, monkeypatch)
    assert torch.allclose(out, ref, atol=1e-5), (out - ref).abs().max()
