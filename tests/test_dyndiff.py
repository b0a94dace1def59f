"""DynDiff maths (policy/dyndiff.py) against hand-computed values and reference implementations."""

from __future__ import annotations

import math

import pytest
import torch

from policy.dyndiff import (
    DynDiffInputError,
    dynamic_mask,
    gaussian_log_prob,
    hybrid_step,
    predict_x0,
    predict_x0_eps,
    quantile_large,
    transition_mean_std,
)
from policy.dyndiff_mask import dynamic_mask_parts


def _lat(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_predict_x0_eps_hand_values():
    x = torch.full((1, 1, 1, 1, 2), 1.0)
    v = torch.tensor([2.0, -1.0]).view(1, 1, 1, 1, 2)
    x0, eps = predict_x0_eps(x, v, 0.25)
    # x0 = x - 0.25 v ; eps = x + 0.75 v
    assert torch.allclose(x0.flatten(), torch.tensor([0.5, 1.25]))
    assert torch.allclose(eps.flatten(), torch.tensor([2.5, 0.25]))
    assert torch.allclose(predict_x0(x, v, 0.25), x0)
    # inverse of the forward process x = (1 - s) x0 + s eps
    assert torch.allclose(0.75 * x0 + 0.25 * eps, x)


def test_predict_x0_eps_per_sample_sigma():
    x, v = _lat(2, 3, 2, 4, 4), _lat(2, 3, 2, 4, 4, seed=1)
    x0, _ = predict_x0_eps(x, v, torch.tensor([0.2, 0.9]))
    assert torch.allclose(x0[1], x[1] - 0.9 * v[1])
    with pytest.raises(DynDiffInputError, match="sigma"):
        predict_x0_eps(x, v, torch.tensor([0.2, 0.9, 0.1]))


@pytest.mark.parametrize("q", [0.0, 0.13, 0.5, 0.8, 0.95, 1.0])
@pytest.mark.parametrize("n", [1, 2, 7, 100])
def test_quantile_large_matches_torch(q, n):
    x = _lat(5, n)
    assert torch.allclose(quantile_large(x, q, dim=-1), torch.quantile(x, q, dim=-1), atol=1e-6)
    ties = torch.randint(0, 3, (5, n), generator=torch.Generator().manual_seed(2)).float()
    assert torch.allclose(quantile_large(ties, q, dim=-1), torch.quantile(ties, q, dim=-1))


@pytest.mark.slow
def test_quantile_large_over_16m_elements():
    n = 2**24 + 10
    # a shuffled 0..n-1 (i * 7919 mod n, 7919 prime and coprime with n; float64 holds the integers
    # exactly): the linearly interpolated quantile is q (n - 1)
    assert n % 7919
    x = ((torch.arange(n, dtype=torch.int64) * 7919) % n).double()
    with pytest.raises(RuntimeError):
        torch.quantile(x, 0.8)
    q = 0.123
    assert quantile_large(x, q, dim=0).item() == pytest.approx(q * (n - 1), abs=1e-6)


def test_dynamic_mask_hand_computed():
    # one channel, one frame, 1x4 positions: dX = [0, 0, 0, 4] -> mean 1 -> R = [-1,-1,-1,3]
    # ||R|| over C = [1,1,1,3] -> minmax [0,0,0,1]; quantile(0.5) of D = 0 -> B = [0,0,0,1]
    dx = torch.tensor([0.0, 0.0, 0.0, 4.0]).view(1, 1, 1, 1, 4)
    m = dynamic_mask(dx, tau=0.5, r_base=0.2)
    assert m.shape == (1, 1, 1, 1, 4)
    assert torch.allclose(m.flatten(), torch.tensor([0.2, 0.2, 0.2, 1.0]))
    # two channels: norms over C
    dx2 = torch.zeros(1, 2, 1, 1, 2)
    dx2[0, 0, 0, 0] = torch.tensor([3.0, -3.0])  # mean 0 -> R = [3, -3]
    dx2[0, 1, 0, 0] = torch.tensor([4.0, 0.0])  # mean 2 -> R = [2, -2]
    m2 = dynamic_mask(dx2, tau=0.5, r_base=0.5)
    # ||R|| = [sqrt(13), sqrt(13)] -> zero range -> D = 0, B = 0 -> M = r_base
    assert torch.allclose(m2, torch.full_like(m2, 0.5))


def test_dynamic_mask_continuous_part_and_first_step():
    dx = torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0]).view(1, 1, 1, 1, 5)
    # R = [-2,-1,0,1,2], |R| = [2,1,0,1,2] -> D = [1, .5, 0, .5, 1]; q(0.5) = 0.5 -> B = [1,0,0,0,1]
    m = dynamic_mask(dx, tau=0.5, r_base=0.0 + 0.4)
    d = torch.tensor([1.0, 0.5, 0.0, 0.5, 1.0])
    b = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0])
    assert torch.allclose(m.flatten(), 0.4 + 0.6 * (0.5 * d + 0.5 * b))
    first = dynamic_mask(None, 0.8, 0.3, shape=(2, 4, 3, 5, 6))
    assert first.shape == (2, 1, 3, 5, 6) and torch.all(first == 0.3)
    with pytest.raises(DynDiffInputError, match="shape"):
        dynamic_mask(None, 0.8, 0.3)


def test_dynamic_mask_range_per_frame_and_large():
    dx = _lat(2, 4, 3, 8, 8)
    dx[:, :, 1] = 5.0  # a static frame: zero range -> M = r_base there
    m = dynamic_mask(dx, 0.7, 0.25)
    assert m.shape == (2, 1, 3, 8, 8)
    assert torch.all(m >= 0.25 - 1e-6) and torch.all(m <= 1 + 1e-6)
    assert torch.allclose(m[:, :, 1], torch.full_like(m[:, :, 1], 0.25))
    # each moving frame reaches the top: max D = 1 and B = 1 there -> M = 1
    assert torch.allclose(m[:, :, 0].flatten(1).amax(1), torch.ones(2))


@pytest.mark.parametrize("grad", [False, True])
def test_dynamic_mask_hand_computed_on_both_paths(grad):
    """The autograd path (mask_grad "differentiable") and the in-place no-grad path give the same hand values,
    a static frame included: frame 0 dX = [0, 0, 0, 4] -> D = [0, 0, 0, 1], B = [0, 0, 0, 1] (tau 0.5);
    frame 1 dX = 5 everywhere -> R = 0, zero range -> D = B = 0 -> M = r_base (not D = 1)."""
    dx = torch.tensor([[0.0, 0.0, 0.0, 4.0], [5.0, 5.0, 5.0, 5.0]]).view(1, 1, 2, 1, 4).requires_grad_(grad)
    m = dynamic_mask(dx, tau=0.5, r_base=0.2)
    assert m.requires_grad == grad
    assert m.detach().flatten().tolist() == pytest.approx([0.2, 0.2, 0.2, 1.0, 0.2, 0.2, 0.2, 0.2])
    if grad:
        m.sum().backward()
        assert torch.isfinite(dx.grad).all()


@pytest.mark.parametrize("tau,r_base", [(0.0, 0.3), (1.0, 0.3), (0.5, 0.0), (0.5, 1.5), (-0.1, 0.5)])
def test_dynamic_mask_rejects_bad_settings(tau, r_base):
    with pytest.raises(DynDiffInputError):
        dynamic_mask(_lat(1, 2, 1, 2, 2), tau, r_base)


def test_hybrid_step_std_zero_is_flow_euler():
    x, v = _lat(2, 3, 4, 5, 6), _lat(2, 3, 4, 5, 6, seed=1)
    mask = torch.zeros(2, 1, 4, 5, 6)
    st = hybrid_step(x, v, 0.8, 0.55, mask, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(st.sample, x + (0.55 - 0.8) * v, atol=1e-5)
    assert torch.allclose(st.mean, st.sample)
    assert torch.all(st.std == 0)


def test_hybrid_step_mask_one_drops_eps_term():
    x, v = _lat(1, 2, 2, 3, 3), _lat(1, 2, 2, 3, 3, seed=1)
    st = hybrid_step(x, v, 0.7, 0.4, torch.ones(1, 1, 2, 3, 3), noise=torch.zeros_like(x))
    x0, _ = predict_x0_eps(x, v, 0.7)
    assert torch.allclose(st.mean, x0 * (1 - 0.4), atol=1e-6)
    assert torch.allclose(st.std, torch.full_like(x, 0.4))


def test_hybrid_step_hand_values():
    x = torch.tensor([1.0]).view(1, 1, 1, 1, 1)
    v = torch.tensor([2.0]).view(1, 1, 1, 1, 1)
    mask = torch.tensor([0.6]).view(1, 1, 1, 1, 1)
    z = torch.tensor([0.5]).view(1, 1, 1, 1, 1)
    st = hybrid_step(x, v, 0.5, 0.25, mask, noise=z)
    # x0 = 0, eps = 2, sn = 0.15, mean = 0 * 0.75 + 2 * sqrt(0.0625 - 0.0225) = 2 * 0.2 = 0.4
    assert st.mean.item() == pytest.approx(0.4, abs=1e-6)
    assert st.std.item() == pytest.approx(0.15, abs=1e-7)
    assert st.sample.item() == pytest.approx(0.4 + 0.15 * 0.5, abs=1e-6)


def test_hybrid_step_empirical_std_matches_field():
    g = torch.Generator().manual_seed(0)
    x, v = _lat(1, 2, 2, 3, 3), _lat(1, 2, 2, 3, 3, seed=1)
    mask = dynamic_mask(_lat(1, 2, 2, 3, 3, seed=3), 0.6, 0.3)
    n = 4000
    xs = x.expand(n, -1, -1, -1, -1)
    st = hybrid_step(xs, v.expand_as(xs), 0.9, 0.6, mask.expand(n, -1, -1, -1, -1), generator=g)
    emp = (st.sample - st.mean).std(dim=0)
    expect = (0.6 * mask[0]).expand_as(emp)
    assert torch.allclose(emp, expect, rtol=0.06)


def test_hybrid_step_conditioning_frames_are_kept():
    x, v = _lat(2, 3, 4, 4, 4), _lat(2, 3, 4, 4, 4, seed=1)
    cond = torch.ones(2, 1, 4, 1, 1)
    cond[:, :, 0] = 0
    st = hybrid_step(x, v, 0.9, 0.6, torch.full((2, 1, 4, 4, 4), 0.5), generator=torch.Generator().manual_seed(1),
                     cond_mask=cond)
    assert torch.equal(st.sample[:, :, 0], x[:, :, 0])
    assert torch.all(st.std[:, :, 0] == 0) and torch.all(st.std[:, :, 1:] == 0.3)
    assert not torch.allclose(st.sample[:, :, 1:], x[:, :, 1:])
    lp = gaussian_log_prob(st.sample, st.mean, st.std, weight_mask=cond)
    ref = torch.distributions.Normal(st.mean[:, :, 1:].double(), st.std[:, :, 1:].double()).log_prob(
        st.sample[:, :, 1:].double())
    assert lp.dtype == torch.float64 and torch.allclose(lp, ref.flatten(1).sum(1), rtol=1e-5)


def test_hybrid_step_validates():
    x, v = _lat(1, 2, 2, 3, 3), _lat(1, 2, 2, 3, 3, seed=1)
    m = torch.full((1, 1, 2, 3, 3), 0.5)
    with pytest.raises(DynDiffInputError, match="sigma_next < sigma"):
        hybrid_step(x, v, 0.4, 0.4, m)
    with pytest.raises(DynDiffInputError, match="sigma_next < sigma"):
        hybrid_step(x, v, 0.4, 0.6, m)
    with pytest.raises(DynDiffInputError, match="mask must be"):
        hybrid_step(x, v, 0.6, 0.4, torch.full((1, 2, 2, 3, 3), 0.5))
    with pytest.raises(DynDiffInputError, match=r"\[0, 1\]"):
        hybrid_step(x, v, 0.6, 0.4, m * 3)
    with pytest.raises(DynDiffInputError, match="v shape"):
        hybrid_step(x, v[:, :1], 0.6, 0.4, m)
    with pytest.raises(DynDiffInputError, match="cond_mask"):
        hybrid_step(x, v, 0.6, 0.4, m, cond_mask=torch.ones(1, 1, 3, 1, 1))
    with pytest.raises(DynDiffInputError, match="latent"):
        hybrid_step(x[0], v[0], 0.6, 0.4, m)


def test_log_prob_equals_torch_normal():
    x, mean = _lat(3, 2, 2, 3, 4), _lat(3, 2, 2, 3, 4, seed=1)
    std = torch.rand(3, 1, 2, 3, 4, generator=torch.Generator().manual_seed(2)) + 0.1
    ref = torch.distributions.Normal(mean.double(), std.double().expand_as(x)).log_prob(x.double()).flatten(1).sum(1)
    assert torch.allclose(gaussian_log_prob(x, mean, std), ref, rtol=1e-5)
    assert torch.allclose(gaussian_log_prob(x, mean, std.expand_as(x)), ref, rtol=1e-5)
    assert torch.allclose(gaussian_log_prob(x, mean, std.expand_as(x).contiguous()), ref, rtol=1e-5)
    n = x[0].numel()
    assert torch.allclose(gaussian_log_prob(x, mean, std, reduce="mean"), ref / n, rtol=1e-5)


def test_log_prob_hand_value_and_exclusions():
    x = torch.tensor([1.0, 0.0, 5.0]).view(1, 1, 1, 1, 3)
    mean = torch.zeros_like(x)
    std = torch.tensor([2.0, 1.0, 0.0]).view(1, 1, 1, 1, 3)
    c = 0.5 * math.log(2 * math.pi)
    expect = (-1 / 8 - math.log(2) - c) + (-c)  # third element has std 0: excluded
    assert gaussian_log_prob(x, mean, std).item() == pytest.approx(expect, rel=1e-6)
    w = torch.tensor([1.0, 0.0, 1.0]).view(1, 1, 1, 1, 3)
    assert gaussian_log_prob(x, mean, std, weight_mask=w).item() == pytest.approx(-1 / 8 - math.log(2) - c)
    assert gaussian_log_prob(x, mean, std, "mean").item() == pytest.approx(expect / 2, rel=1e-6)
    assert torch.isfinite(gaussian_log_prob(x, mean, torch.zeros_like(x))).all()
    with pytest.raises(DynDiffInputError, match="reduce"):
        gaussian_log_prob(x, mean, std, reduce="max")  # type: ignore[arg-type]
    with pytest.raises(DynDiffInputError, match="broadcast"):
        gaussian_log_prob(x, mean, torch.ones(1, 1, 1, 1, 2))


def test_different_masks_same_residual_give_different_log_probs():
    x_t, v = _lat(1, 2, 2, 4, 4), _lat(1, 2, 2, 4, 4, seed=1)
    m1 = torch.full((1, 1, 2, 4, 4), 0.3)
    m2 = dynamic_mask(_lat(1, 2, 2, 4, 4, seed=5), 0.7, 0.3)
    z = _lat(1, 2, 2, 4, 4, seed=9)
    s1 = hybrid_step(x_t, v, 0.8, 0.5, m1)
    s2 = hybrid_step(x_t, v, 0.8, 0.5, m2)
    resid = s1.std * z  # the same residual under both Gaussians
    lp1 = gaussian_log_prob(s1.mean + resid, s1.mean, s1.std)
    lp2 = gaussian_log_prob(s2.mean + resid, s2.mean, s2.std)
    assert not torch.allclose(lp1, lp2)
    # and the difference has both a quadratic and a log-scale part
    log_scale = -(torch.log(s2.std) - torch.log(s1.std)).flatten(1).sum(1)
    quad = -0.5 * ((resid / s2.std) ** 2 - (resid / s1.std) ** 2).flatten(1).sum(1)
    assert torch.allclose(lp2 - lp1, (log_scale + quad).double(), rtol=1e-4, atol=1e-3)


def _tiny_velocity_net():
    torch.manual_seed(0)
    return torch.nn.Conv3d(2, 2, kernel_size=1)


@pytest.mark.parametrize("differentiable_mask", [False, True])
def test_gradient_flows_to_velocity_network(differentiable_mask):
    net = _tiny_velocity_net()
    x_t = _lat(1, 2, 3, 4, 4)
    prev_x0 = _lat(1, 2, 3, 4, 4, seed=3)
    x_next = _lat(1, 2, 3, 4, 4, seed=4)
    v = net(x_t)
    x0 = predict_x0(x_t, v, 0.8)
    delta = x0 - prev_x0
    mask = dynamic_mask(delta if differentiable_mask else delta.detach(), 0.6, 0.3)
    assert mask.requires_grad == differentiable_mask
    mean, std = hybrid_step(x_t, v, 0.8, 0.5, mask).mean, None
    std = 0.5 * mask
    lp = gaussian_log_prob(x_next, mean, std.expand_as(x_next))
    lp.sum().backward()
    grad = net.weight.grad
    assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0
    if differentiable_mask:
        # the mask path adds gradient: compare with a detached-mask recomputation
        net2 = _tiny_velocity_net()
        v2 = net2(x_t)
        m2 = dynamic_mask((predict_x0(x_t, v2, 0.8) - prev_x0).detach(), 0.6, 0.3)
        lp2 = gaussian_log_prob(x_next, hybrid_step(x_t, v2, 0.8, 0.5, m2).mean, (0.5 * m2).expand_as(x_next))
        lp2.sum().backward()
        assert torch.allclose(lp, lp2)
        assert not torch.allclose(grad, net2.weight.grad)


@pytest.mark.parametrize("tau", [0.1, 0.5, 0.8, 0.97])
def test_dynamic_mask_binary_part_matches_torch_quantile(tau):
    """B = 1[D > quantile(D, tau)] with torch.quantile's linear interpolation, ties included."""
    g = torch.Generator().manual_seed(7)
    dx = torch.randn(2, 3, 4, 6, 5, generator=g)
    dx[:, :, 2] = torch.randint(0, 3, (2, 3, 6, 5), generator=g).float()  # many ties after normalisation
    r_base = 0.2
    m = dynamic_mask(dx, tau, r_base)
    resid = dx - dx.mean(dim=(-2, -1), keepdim=True)
    norm = resid.pow(2).sum(1, keepdim=True).sqrt()
    lo = norm.flatten(-2).amin(-1, keepdim=True).unsqueeze(-1)
    hi = norm.flatten(-2).amax(-1, keepdim=True).unsqueeze(-1)
    d = torch.where(hi > lo, (norm - lo) / (hi - lo).clamp_min(1e-12), torch.zeros_like(norm))
    q = torch.quantile(d.flatten(-2), tau, dim=-1).unsqueeze(-1).unsqueeze(-1)
    b = (d > q).float()
    assert torch.allclose(m, r_base + (1 - r_base) * (0.5 * d + 0.5 * b), atol=1e-5)


def _log_prob_float64(x, mean, std):
    """(E4) in float64 from the given (float32) tensors: the reference the float32 inputs allow."""
    x, mean, std = x.double(), mean.double(), std.double().expand_as(x)
    return (-((x - mean) / std) ** 2 / 2 - std.log() - 0.5 * math.log(2 * math.pi)).flatten(1).sum(1)


def _real_size_gaussian():
    """A Cosmos-2.5-size latent (16 x 24 x 88 x 160, ~5.4M elements per sample; 93 frames at 704x1280)
    around mean 0 with a per-position std in [0.3, 1] (shared over channels, as the DynDiff std is)."""
    gen = torch.Generator().manual_seed(0)
    std = 0.3 + 0.7 * torch.rand(1, 1, 24, 88, 160, generator=gen)
    x = std * torch.randn(1, 16, 24, 88, 160, generator=gen)
    return x, torch.zeros_like(x), std, gen


def test_log_prob_of_a_real_size_latent_matches_float64():
    # log p ~ -3.5e6 nats: float32 spaces values 0.25 apart there, and a float32 reduction over 5.4M
    # elements was off by hundreds of nats; the float64 reduction is within rounding of the elements
    x, mean, std, _ = _real_size_gaussian()
    lp = gaussian_log_prob(x, mean, std)
    ref = _log_prob_float64(x, mean, std)
    assert abs(float(ref[0])) > 1e6
    assert float((lp.double() - ref).abs().max()) < 1e-2
    assert lp.dtype == torch.float64
    n = x[0].numel()
    assert float((gaussian_log_prob(x, mean, std, "mean") - ref / n).abs().max()) < 1e-8


def test_log_ratio_of_a_tiny_mean_shift_on_a_real_size_latent():
    # a small policy change moves 640 elements' means 1e-4 toward the sample (far above float32's spacing
    # of x, so the elements resolve it): the true log-ratio is ~0.1, below float32's 0.25-nat resolution
    # of either summed log-prob (a float32 ratio could only be 1, 1.28, 0.78, ...)
    x, mean, std, _ = _real_size_gaussian()
    mean2 = mean.clone()
    mean2[:, 0, 5, :4] = 1e-4 * x[:, 0, 5, :4].sign()
    true = _log_prob_float64(x, mean2, std) - _log_prob_float64(x, mean, std)
    got = gaussian_log_prob(x, mean2, std) - gaussian_log_prob(x, mean, std)
    assert 0.05 < float(true[0]) < 0.2
    assert float((got - true).abs().max()) < 1e-3


def test_transition_log_likelihood_hand_computed_with_mask_and_conditioning_frame():
    """E3 + E4 end to end on a 1 x 2 x 2 x 1 x 2 latent: frame 0 is a conditioning frame (kept, excluded),
    frame 1 has masks 0.6 and 1.0; the std field is shared over the 2 channels, so each position's
    -log(sn) - 0.5 log 2 pi counts twice (summed over channels, not averaged)."""
    x_t = torch.ones(1, 2, 2, 1, 2)
    v = torch.full_like(x_t, 2.0)  # x0_hat = 1 - 0.5 * 2 = 0, eps_hat = 1 + 0.5 * 2 = 2
    mask = torch.tensor([0.3, 0.3, 0.6, 1.0]).view(1, 1, 2, 1, 2)
    cond = torch.tensor([0.0, 1.0]).view(1, 1, 2, 1, 1)
    mean, std = transition_mean_std(x_t, v, 0.5, 0.25, mask, cond_mask=cond)
    # M 0.6: sn = 0.15, sqrt(0.25^2 - 0.15^2) = 0.2, mean = 0 * 0.75 + 2 * 0.2 = 0.4; M 1: sn 0.25, mean 0
    want_mean = torch.tensor([1.0, 1.0, 0.4, 0.0]).view(1, 1, 2, 1, 2).expand(1, 2, 2, 1, 2)
    want_std = torch.tensor([0.0, 0.0, 0.15, 0.25]).view(1, 1, 2, 1, 2).expand(1, 2, 2, 1, 2)
    assert torch.allclose(mean, want_mean, atol=1e-6) and torch.allclose(std, want_std, atol=1e-7)
    z = torch.tensor([[0.5, 2.0], [-1.0, -1.0]]).view(1, 2, 1, 1, 2)  # generated frame, channels x positions
    x_next = torch.full_like(x_t, 7.0)  # the conditioning frame's value must not matter
    x_next[:, :, 1:] = want_mean[:, :, 1:] + want_std[:, :, 1:] * z
    c = 0.5 * math.log(2 * math.pi)
    expect = -(0.25 + 1.0) / 2 - 2 * math.log(0.15) - (4.0 + 1.0) / 2 - 2 * math.log(0.25) - 4 * c
    lp = gaussian_log_prob(x_next, mean, std, weight_mask=cond)
    assert lp.dtype == torch.float64 and float(lp) == pytest.approx(expect, abs=1e-5)
    assert float(gaussian_log_prob(x_next, mean, std, "mean", weight_mask=cond)) == pytest.approx(expect / 4, abs=2e-6)
    # the constant terms alone: a sample at the mean has log p = -sum(log sn) - n/2 log 2 pi
    at_mean = gaussian_log_prob(mean, mean, std, weight_mask=cond)
    assert float(at_mean) == pytest.approx(-2 * math.log(0.15) - 2 * math.log(0.25) - 4 * c, abs=1e-5)


def test_dynamic_mask_quantile_position_is_exact_when_tau_times_n_minus_1_is_whole():
    """tau = 0.58 over n = 51 positions: the quantile sits exactly at order statistic 29 (0.58 * 50 = 29), but
    the float product is 28.999999999999996; flooring that put order statistic 29 itself into B.
    dX = [-1275, 1, 2, ..., 50] has mean 0 (1 + ... + 50 = 1275), so R = dX and ||R|| = [1275, 1, ..., 50];
    D = (||R|| - 1) / 1274: position j >= 1 holds (j - 1) / 1274 (order statistic j - 1), position 0 holds 1.
    q = D_(29) = 29 / 1274 at position 30, so B = 1 at positions 31..50 and 0: 21 positions, position 30 not."""
    assert 0.58 * 50 < 29  # the float rounding this test is about
    dx = torch.tensor([-1275.0] + [float(j) for j in range(1, 51)]).view(1, 1, 1, 1, 51)
    r_base = 0.3
    for grad in (False, True):
        m, b = dynamic_mask_parts(dx.clone().requires_grad_(grad), tau=0.58, r_base=r_base)
        want_b = [True] + [j >= 31 for j in range(1, 51)]
        assert b.flatten().tolist() == want_b
        d30 = 29 / 1274
        assert float(m.detach().flatten()[30]) == pytest.approx(r_base + (1 - r_base) * 0.5 * d30, abs=1e-6)
        assert float(m.detach().flatten()[31]) == pytest.approx(r_base + (1 - r_base) * (0.5 * 30 / 1274 + 0.5), abs=1e-6)
