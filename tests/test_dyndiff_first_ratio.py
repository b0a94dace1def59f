"""The GRPO ratio at the first inner step (parameters still the rollout's) is exactly 1 (DESIGN.md §5-§6).

The rollout records the old log-prob under no_grad (policy/dyndiff*.py take their in-place paths); the
update recomputes it in train mode with autograd on (the out-of-place paths, and with ``mask_grad =
"differentiable"`` a mask that carries gradient). Both must give bit-identical values: a ratio off 1 by
rounding alone is a policy-gradient signal from nothing, and summed over a real latent's millions of
elements the rounding grows with the latent (tests/test_rollout_precision.py covers the bf16 numerics).
CPU, tiny seeded models.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from policy.conditioning import Conditioning
from policy.dyndiff import gaussian_log_prob, transition_mean_std
from policy.dyndiff_mask import dynamic_mask_parts
from policy.rollout import RolloutConfig, rollout, step_log_prob
from policy.world_model import FlowWorldModel
from training.grpo import clipped_policy_loss
from training.numerics import cast_like_engine


@pytest.mark.parametrize("r_base", [0.3, 0.7, 1.0 / 3.0])
@pytest.mark.parametrize("given_binary", [False, True])
def test_mask_with_autograd_is_bitwise_the_no_grad_mask(r_base, given_binary):
    """M = r_base + (1 - r_base)(0.5 D + 0.5 B): the autograd path (mask_grad "differentiable") and the
    in-place no-grad path (the rollout) must round identically, not only to float precision."""
    gen = torch.Generator().manual_seed(5)
    dx = torch.randn(2, 4, 3, 8, 8, generator=gen)
    binary = torch.rand(2, 1, 3, 8, 8, generator=gen) > 0.5 if given_binary else None
    m_plain, b_plain = dynamic_mask_parts(dx.clone(), 0.8, r_base, binary=binary)
    m_grad, b_grad = dynamic_mask_parts(dx.clone().requires_grad_(), 0.8, r_base, binary=binary)
    assert m_grad.requires_grad
    assert torch.equal(b_plain, b_grad)
    assert torch.equal(m_plain, m_grad.detach())


def _tiny(kind: str, device: str, dtype: str = "float32") -> tuple[FlowWorldModel, Conditioning]:
    torch.manual_seed(0)
    model = FlowWorldModel.tiny_cosmos() if kind == "cosmos" else FlowWorldModel.tiny_wan()
    model.to(device)
    cast_like_engine(model.transformer, dtype)  # a DeepSpeed engine's numerics (training/numerics.py)
    model.eval()
    images = np.random.default_rng(0).integers(0, 256, (1, 32, 32, 3), dtype=np.uint8)
    with torch.no_grad():
        cond = model.encode_prompts(images, ["open the drawer"], num_frames=9).repeat_interleave(3)
    return model, cond


@pytest.fixture(scope="module", params=["cosmos", "wan"])
def tiny(request):
    return _tiny(request.param, "cpu")


def _check_first_ratio(model: FlowWorldModel, cond: Conditioning, cfg: RolloutConfig) -> None:
    """As the update computes it (train mode, gradients on, training/update.py -> step_log_prob ->
    clipped_policy_loss), at the rollout's parameters: log_prob == old log_prob bit for bit, so every ratio
    is exactly 1, nothing is clipped, approx_kl is 0 and the loss is -mean(A) (A = [1, -2, 0.5]: 1/6)."""
    device = cond.first_frame_latent.device
    ro = rollout(model, cond, cfg, generator=torch.Generator(device=device).manual_seed(1))
    assert [r.prev_x0_hat is None for r in ro.steps] == [True, False, False, False]  # steps with a D and a B
    adv = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64, device=device)
    model.train()
    try:
        with torch.enable_grad():
            for record in ro.steps:
                log_prob, mean, _, flips = step_log_prob(model, cond, record, cfg)
                assert log_prob.requires_grad and mean.requires_grad
                assert torch.equal(log_prob.detach(), record.log_prob), record.step
                assert float(flips.abs().max()) == 0.0
                loss, clip_frac, approx_kl = clipped_policy_loss(log_prob, record.log_prob, adv, 0.2)
                assert float(loss.detach()) == pytest.approx(1.0 / 6.0, abs=1e-15)
                assert float(clip_frac) == 0.0 and float(approx_kl) == 0.0
    finally:
        model.eval()


def _cfg(mask_grad: str, ratio_mask: str, reduce: str) -> RolloutConfig:
    return RolloutConfig(num_steps=5, sde_window=(0, 4), mask_grad=mask_grad,  # type: ignore[arg-type]
                         ratio_mask=ratio_mask, log_prob_reduce=reduce)  # type: ignore[arg-type]


@pytest.mark.parametrize("mask_grad", ["detached", "differentiable"])
@pytest.mark.parametrize("ratio_mask", ["own", "rollout"])
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_first_inner_step_ratio_is_exactly_one_with_autograd(tiny, mask_grad, ratio_mask, reduce):
    _check_first_ratio(*tiny, _cfg(mask_grad, ratio_mask, reduce))


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["cosmos", "wan"])
@pytest.mark.parametrize("mask_grad", ["detached", "differentiable"])
def test_first_inner_step_ratio_is_exactly_one_on_cuda_in_bf16(kind, mask_grad):
    """The same on CUDA in a bf16 engine's numerics: the attention and matmul kernels the transformer picks
    with gradients on must give the rollout's velocity (no other kernel, no nondeterministic reduction)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    _check_first_ratio(*_tiny(kind, "cuda", "bfloat16"), _cfg(mask_grad, "own", "sum"))


def test_ratio_of_two_masks_keeps_the_log_scale_terms_hand_computed():
    """DESIGN.md §6: each policy's own Gaussian, so log-scale terms stay. Latent [1, 2, 2, 1, 1]: frame 0 is a
    conditioning frame (excluded), frame 1 one position in 2 channels; x_t = 1, v = 2, sigma 0.5 -> 0.25, so
    x0_hat = 1 - 0.5 * 2 = 0 and eps_hat = 1 + 0.5 * 2 = 2 for both policies.
    Old mask 0.6: sn = 0.15, mean = 0 * 0.75 + 2 * sqrt(0.0625 - 0.0225) = 0.4; with z = [0.5, -1] per channel
    x_next = [0.475, 0.25]. New mask 1: sn = 0.25, mean = 0 (the eps_hat term drops).
    log p_old = -(0.5^2 + 1^2)/2 - 2 log 0.15 - 2 c = -0.625 - 2 log 0.15 - 2 c
    log p_new = -(0.475^2 + 0.25^2)/(2 * 0.0625) - 2 log 0.25 - 2 c = -2.305 - 2 log 0.25 - 2 c
    log rho = -1.68 + 2 log(0.15 / 0.25) = -1.68 + 2 log 0.6 (c cancels; dropping the log-scale terms would give
    -1.68), rho = 0.36 e^-1.68 = 0.0670947...; with A = 1, delta 0.2 the min takes rho A: loss = -rho."""
    x_t = torch.ones(1, 2, 2, 1, 1)
    v = torch.full_like(x_t, 2.0)
    cond = torch.tensor([0.0, 1.0]).view(1, 1, 2, 1, 1)
    old_mean, old_std = transition_mean_std(x_t, v, 0.5, 0.25, torch.tensor([0.3, 0.6]).view(1, 1, 2, 1, 1),
                                            cond_mask=cond)
    new_mean, new_std = transition_mean_std(x_t, v, 0.5, 0.25, torch.tensor([0.3, 1.0]).view(1, 1, 2, 1, 1),
                                            cond_mask=cond)
    x_next = x_t.clone()  # the conditioning frame keeps x_t
    x_next[0, :, 1, 0, 0] = torch.tensor([0.475, 0.25])
    old = gaussian_log_prob(x_next, old_mean, old_std, weight_mask=cond)
    new = gaussian_log_prob(x_next, new_mean, new_std, weight_mask=cond)
    c = 0.5 * np.log(2 * np.pi)
    assert float(old) == pytest.approx(-0.625 - 2 * np.log(0.15) - 2 * c, abs=1e-6)
    assert float(new) == pytest.approx(-2.305 - 2 * np.log(0.25) - 2 * c, abs=1e-6)
    assert float(new - old) == pytest.approx(-1.68 + 2 * np.log(0.6), abs=1e-6)
    loss, clip_frac, _ = clipped_policy_loss(new, old, torch.ones(1, dtype=torch.float64), 0.2)
    assert float(loss) == pytest.approx(-0.36 * np.exp(-1.68), abs=1e-7) and float(clip_frac) == 1.0
