"""Classifier-free guidance: the pure combination, the doubled-batch velocity on tiny Cosmos / Wan
transformers, and guided rollouts whose recomputed likelihoods match."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from policy.conditioning import Conditioning
from policy.rollout import RolloutConfig, RolloutConfigError, rollout, sample_ode, step_log_prob
from policy.world_model import FlowWorldModel, guided_velocity

FRAMES = 9


@pytest.fixture(scope="module", params=["cosmos", "wan"])
def setup(request):
    m = FlowWorldModel.tiny_cosmos() if request.param == "cosmos" else FlowWorldModel.tiny_wan()
    m.eval()
    imgs = np.random.default_rng(0).integers(0, 256, (2, 32, 32, 3), dtype=np.uint8)
    cond = m.encode_prompts(imgs, ["stack the blocks", "open the drawer"], num_frames=FRAMES, negative_prompt="")
    return m, cond


def _x(cond: Conditioning, seed: int = 0) -> torch.Tensor:
    ff = cond.first_frame_latent
    return torch.randn((ff.shape[0], ff.shape[1], cond.num_latent_frames, *ff.shape[3:]),
                       generator=torch.Generator().manual_seed(seed))


def test_guided_velocity_hand_computed():
    vc, vu = torch.tensor([2.0, -1.0]), torch.tensor([1.0, 1.0])
    assert torch.equal(guided_velocity(vc, vu, 3.0), torch.tensor([4.0, -5.0]))  # 1 + 3 * 1, 1 + 3 * -2
    assert torch.equal(guided_velocity(vc, vu, 1.0), vc) and torch.equal(guided_velocity(vc, vu, 0.0), vu)


def test_guided_velocity_is_one_doubled_pass_of_both_branches(setup):
    model, cond = setup
    assert cond.negative_text_embeds is not None and cond.negative_text_embeds.shape == cond.text_embeds.shape
    x, s = _x(cond), torch.tensor([0.7, 0.4])
    with torch.no_grad():
        v_cond = model.velocity(x, s, cond)
        v_neg = model.velocity(x, s, Conditioning(cond.first_frame_latent, cond.negative_text_embeds, cond.cond_mask))
        guided = model.velocity(x, s, cond, guidance_scale=3.0)
        plain = model.velocity(x, s, cond, guidance_scale=1.0)
    assert torch.equal(plain, v_cond)  # w = 1: the unguided path, untouched
    assert torch.allclose(guided, v_neg + 3.0 * (v_cond - v_neg), atol=1e-5)
    assert not torch.allclose(guided, v_cond, atol=1e-4)  # the negative prompt changes the field
    assert torch.all(guided[:, :, 0] == 0)  # conditioning frames still get no velocity


def test_guidance_needs_negative_embeddings(setup):
    model, cond = setup
    bare = Conditioning(cond.first_frame_latent, cond.text_embeds, cond.cond_mask)
    with pytest.raises(ValueError, match="needs negative text embeddings"):
        model.velocity(_x(cond), 0.5, bare, guidance_scale=2.0)
    with pytest.raises(ValueError, match="negative_text_embeds must match"):
        Conditioning(cond.first_frame_latent, cond.text_embeds, cond.cond_mask, cond.text_embeds[:, :2])
    rep = cond.repeat_interleave(3)
    assert rep.negative_text_embeds.shape[0] == 6 and rep.select(slice(0, 1)).negative_text_embeds.shape[0] == 1
    with pytest.raises(RolloutConfigError, match="guidance_scale"):
        RolloutConfig(num_steps=4, sde_window=(0, 2), guidance_scale=-1.0)


def test_guided_rollout_likelihoods_are_recomputed_exactly(setup):
    model, cond = setup
    cfg = RolloutConfig(num_steps=4, sde_window=(0, 2), guidance_scale=2.5)
    ro = rollout(model, cond, cfg, generator=torch.Generator().manual_seed(3))
    plain = rollout(model, cond, RolloutConfig(num_steps=4, sde_window=(0, 2)), generator=torch.Generator().manual_seed(3))
    assert not torch.allclose(ro.latents, plain.latents, atol=1e-4)
    for r in ro.steps:
        lp, _, _, _ = step_log_prob(model, cond, r, cfg)
        assert torch.allclose(torch.exp(lp - r.log_prob), torch.ones_like(lp), atol=1e-4)
    noise = _x(cond, 5)
    with torch.no_grad():
        guided = sample_ode(model, cond, 3, 3.0, noise=noise, guidance_scale=2.5)
        again = sample_ode(model, cond, 3, 3.0, noise=noise, guidance_scale=2.5)
    assert torch.equal(guided, again)


@pytest.mark.parametrize("scale", [-1.0, float("nan"), float("inf")])
def test_the_velocity_refuses_a_guidance_scale_no_config_would_accept(setup, scale):
    """Before: RolloutConfig, TrainConfig and training.generate refused these, but velocity() and sample_ode(), which
    take the scale directly, ran them: a negative w extrapolated away from the prompt without a word, and NaN / inf
    made every latent NaN."""
    model, cond = setup
    with pytest.raises(ValueError, match=r"guidance_scale must be a finite number >= 0"):
        model.velocity(_x(cond), 0.5, cond, guidance_scale=scale)
    with pytest.raises(ValueError, match=r"guidance_scale must be a finite number >= 0"):
        sample_ode(model, cond, 2, 3.0, noise=_x(cond), guidance_scale=scale)
