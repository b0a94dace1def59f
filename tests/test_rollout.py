"""DynDiff rollouts end to end on tiny random Cosmos / Wan models, and likelihood recomputation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from policy.conditioning import Conditioning, make_cond_mask
from policy.dyndiff import predict_x0
from policy.rollout import (
    RolloutConfig,
    RolloutConfigError,
    rollout,
    sample_ode,
    sigma_schedule,
    step_log_prob,
)
from policy.steps import likelihood_steps
from policy.world_model import FlowWorldModel

FRAMES = 9


@pytest.fixture(scope="module", params=["cosmos", "wan"])
def setup(request):
    m = FlowWorldModel.tiny_cosmos() if request.param == "cosmos" else FlowWorldModel.tiny_wan()
    m.eval()
    imgs = np.random.default_rng(0).integers(0, 256, (1, 32, 32, 3), dtype=np.uint8)
    cond = m.encode_prompts(imgs, ["stack the blocks"], num_frames=FRAMES).repeat_interleave(3)
    return m, cond


def test_sigma_schedule_values():
    s = sigma_schedule(4, 1.0)
    assert torch.allclose(s, torch.tensor([1.0, 0.75, 0.5, 0.25, 0.0]))
    s3 = sigma_schedule(2, 3.0)
    assert torch.allclose(s3, torch.tensor([1.0, 0.75, 0.0]))  # 3 * 0.5 / (1 + 2 * 0.5)
    s10 = sigma_schedule(10, 5.0)
    assert s10[0] == 1 and s10[-1] == 0 and torch.all(s10[1:] < s10[:-1])
    with pytest.raises(RolloutConfigError):
        sigma_schedule(0, 1.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"sde_window": (3, 3)},
        {"sde_window": (-1, 2)},
        {"num_steps": 4, "sde_window": (0, 5)},
        {"tau": 1.0},
        {"tau": 0.0},
        {"r_base": 0.0},
        {"r_base": 1.2},
        {"shift": 0.0},
        {"num_steps": 0},
        {"log_prob_reduce": "max"},
        {"mask_grad": "sometimes"},
    ],
)
def test_config_rejects_bad_values(kwargs):
    with pytest.raises(RolloutConfigError):
        RolloutConfig(**kwargs)


def test_rollout_end_to_end(setup):
    model, cond = setup
    cfg = RolloutConfig(num_steps=6, sde_window=(1, 4))
    ro = rollout(model, cond, cfg, generator=torch.Generator().manual_seed(0))
    assert ro.latents.shape == (3, 16, 3, 4, 4)
    assert [r.step for r in ro.steps] == [1, 2, 3]
    for r in ro.steps:
        assert r.log_prob.shape == (3,) and torch.isfinite(r.log_prob).all()
        assert r.mask_mean.shape == (3,) and torch.all(r.mask_mean >= cfg.r_base - 1e-6)
        assert torch.all(r.sigma_next < r.sigma)
    assert ro.steps[0].prev_x0_hat is None  # first SDE step: D = B = 0 -> mask = r_base
    assert torch.allclose(ro.steps[0].mask_mean, torch.full((3,), cfg.r_base))
    assert ro.steps[1].prev_x0_hat is not None
    assert not torch.allclose(ro.steps[1].mask_mean, torch.full((3,), cfg.r_base))
    # the records chain: x_next of one SDE step is x_t of the next
    assert torch.equal(ro.steps[0].x_next, ro.steps[1].x_t)
    # conditioning latent frame equals the encoded first frame at the end
    assert torch.equal(ro.latents[:, :, :1], cond.first_frame_latent)
    frames = model.decode(ro.latents)
    assert frames.shape == (3, FRAMES, 32, 32, 3) and frames.dtype == np.uint8
    # same prompt, different draws -> different samples in the group
    assert not torch.allclose(ro.latents[0], ro.latents[1])


def test_window_through_the_last_step_records_no_zero_noise_step(setup):
    """The last step goes to sigma 0: its DynDiff std is 0, so it samples its mean and records nothing (a record
    had log-prob 0 and, in the update, a mu-KL divided by a zero reference std: ~1e12 x the GRPO loss)."""
    model, cond = setup
    noise = torch.randn(3, 16, 3, 4, 4, generator=torch.Generator().manual_seed(5))
    full = rollout(model, cond, RolloutConfig(num_steps=4, sde_window=(0, 4)), noise=noise,
                   generator=torch.Generator().manual_seed(1))
    assert [r.step for r in full.steps] == [0, 1, 2] and all(bool((r.sigma_next > 0).all()) for r in full.steps)
    assert list(likelihood_steps(4, (0, 4))) == [0, 1, 2] and list(likelihood_steps(4, (3, 4))) == []
    assert list(likelihood_steps(4, (1, 3))) == [1, 2]
    short = rollout(model, cond, RolloutConfig(num_steps=4, sde_window=(0, 3)), noise=noise,
                    generator=torch.Generator().manual_seed(1))
    assert all(torch.equal(a.x_next, b.x_next) for a, b in zip(full.steps, short.steps, strict=True))
    assert torch.allclose(full.latents, short.latents, atol=1e-5)  # std 0 there: the SDE step is the Euler step


def test_ode_steps_are_deterministic_and_sde_steps_are_not(setup):
    model, cond = setup
    cfg = RolloutConfig(num_steps=5, sde_window=(2, 4))
    noise = torch.randn(3, 16, 3, 4, 4, generator=torch.Generator().manual_seed(5))
    a = rollout(model, cond, cfg, noise=noise, generator=torch.Generator().manual_seed(1))
    b = rollout(model, cond, cfg, noise=noise, generator=torch.Generator().manual_seed(2))
    assert [r.step for r in a.steps] == [2, 3]
    assert torch.equal(a.steps[0].x_t, b.steps[0].x_t)  # steps 0, 1: Euler, same input -> same state
    assert not torch.allclose(a.steps[0].x_next, b.steps[0].x_next)
    assert not torch.allclose(a.latents, b.latents)
    c = rollout(model, cond, cfg, noise=noise, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a.latents, c.latents)  # fully reproducible given noise + generator


def test_mask_history_trajectory_uses_ode_predictions(setup):
    model, cond = setup
    cfg = RolloutConfig(num_steps=5, sde_window=(2, 4), mask_history="trajectory")
    ro = rollout(model, cond, cfg, generator=torch.Generator().manual_seed(0))
    assert ro.steps[0].prev_x0_hat is not None


def test_delta_x0_is_between_denoising_steps(setup):
    """The motion signal's previous prediction (policy.dyndiff.dynamic_mask: Delta x0_hat between denoising steps,
    DESIGN.md §5) is the x0_hat the rollout's policy made at the previous step's state, for every latent frame."""
    model, cond = setup
    ro = rollout(model, cond, RolloutConfig(num_steps=6, sde_window=(1, 4)), generator=torch.Generator().manual_seed(0))
    for prev, rec in zip(ro.steps, ro.steps[1:], strict=False):
        with torch.no_grad():
            want = predict_x0(prev.x_t, model.velocity(prev.x_t, prev.sigma, cond), prev.sigma)
        assert rec.step == prev.step + 1 and torch.equal(rec.prev_x0_hat, want)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_recomputed_log_prob_matches_old_under_same_params(setup, reduce):
    model, cond = setup
    cfg = RolloutConfig(num_steps=6, sde_window=(0, 3), log_prob_reduce=reduce)
    ro = rollout(model, cond, cfg, generator=torch.Generator().manual_seed(3))
    for r in ro.steps:
        lp, mean, std, _ = step_log_prob(model, cond, r, cfg)
        assert mean.shape == r.x_t.shape and std.shape == r.x_t.shape
        ratio = torch.exp(lp - r.log_prob)
        assert torch.allclose(ratio, torch.ones_like(ratio), atol=1e-4)
        assert torch.all(std[:, :, 0] == 0)  # conditioning frame: no likelihood


@pytest.mark.parametrize("mask_grad", ["detached", "differentiable"])
def test_step_log_prob_gradient_reaches_transformer(setup, mask_grad):
    model, cond = setup
    cfg = RolloutConfig(num_steps=4, sde_window=(0, 2), mask_grad=mask_grad)
    ro = rollout(model, cond, cfg, generator=torch.Generator().manual_seed(4))
    model.zero_grad(set_to_none=True)
    lp, _, std, _ = step_log_prob(model, cond, ro.steps[1], cfg)
    assert std.requires_grad == (mask_grad == "differentiable")
    lp.sum().backward()
    grads = [p.grad for p in model.transformer.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    assert sum(float(g.abs().sum()) for g in grads) > 0
    model.zero_grad(set_to_none=True)


def test_changed_parameters_change_the_ratio(setup):
    model, cond = setup
    cfg = RolloutConfig(num_steps=4, sde_window=(0, 2))
    ro = rollout(model, cond, cfg, generator=torch.Generator().manual_seed(6))
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    try:
        with torch.no_grad():
            for p in model.transformer.parameters():
                p.add_(0.05 * torch.randn_like(p))
            lp, _, _, _ = step_log_prob(model, cond, ro.steps[1], cfg)
        assert not torch.allclose(lp, ro.steps[1].log_prob, atol=1e-3)
    finally:
        model.load_state_dict(saved)


class _ConstantVelocity:
    """velocity = c on generated frames, 0 on conditioning frames (what the wrappers do)."""

    def __init__(self, c: float) -> None:
        self.c = c

    def velocity(self, x, sigma, cond, guidance_scale=1.0):  # noqa: ANN001, ANN201 (test double)
        return self.c * cond.cond_mask.to(x.dtype).expand_as(x)


def test_sample_ode_hand_computed():
    b, c, f, h, w = 2, 4, 3, 2, 2
    ff = torch.full((b, c, 1, h, w), 7.0)
    cond = Conditioning(ff, torch.zeros(b, 2, 3), make_cond_mask(b, f, 1))
    noise = torch.randn(b, c, f, h, w, generator=torch.Generator().manual_seed(0))
    out = sample_ode(_ConstantVelocity(0.5), cond, num_steps=4, shift=3.0, noise=noise)
    # sigma runs 1 -> 0, so the Euler steps add up to -1 * v: x0 = noise - 0.5 on generated frames
    assert torch.allclose(out[:, :, 1:], noise[:, :, 1:] - 0.5, atol=1e-6)
    assert torch.equal(out[:, :, :1], ff)  # the conditioning frame keeps the first-frame latent


def test_sample_ode_equals_a_rollout_whose_only_sde_step_is_the_last():
    """The last step has sigma_next = 0, so a DynDiff step there has std 0 and mean x - s v: the Euler step."""
    m = FlowWorldModel.tiny_cosmos().eval()
    imgs = np.random.default_rng(0).integers(0, 256, (2, 32, 32, 3), dtype=np.uint8)
    with torch.no_grad():
        cond = m.encode_prompts(imgs, ["a", "b"], num_frames=9)
        noise = torch.randn((2, 16, cond.num_latent_frames, 4, 4), generator=torch.Generator().manual_seed(3))
        ode = sample_ode(m, cond, 4, 3.0, noise=noise)
        sde = rollout(m, cond, RolloutConfig(num_steps=4, sde_window=(3, 4), shift=3.0), noise=noise).latents
        other = sample_ode(m, cond, 4, 3.0, noise=noise + 1.0)
    assert torch.allclose(ode, sde, atol=1e-5)
    assert not torch.allclose(ode, other)  # the noise matters (the test could fail)
