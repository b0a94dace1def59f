"""Hand-computed checks of training/grpo.py (DESIGN.md §6, paper Sec. 4.2)."""

from __future__ import annotations

import math

import pytest
import torch

from training.grpo import clipped_policy_loss, group_advantages, mean_kl


def test_group_advantages_hand_computed_population_std():
    # group "a": eligible [1, 2, 3] (None excluded): mean 2, population std sqrt(2/3)
    # group "b": [5, nan] -> one eligible -> skipped
    # group "c": [inf, 2, 4, 4]: eligible [2, 4, 4], mean 10/3, std sqrt(8/9)
    rewards = [1.0, 2.0, 3.0, None, 5.0, float("nan"), float("inf"), 2.0, 4.0, 4.0]
    groups = ["a", "a", "a", "a", "b", "b", "c", "c", "c", "c"]
    adv, valid, stats = group_advantages(rewards, groups, a_max=5.0, eps=0.0)
    s_a = math.sqrt(2 / 3)
    s_c = math.sqrt(8 / 9)
    expected = [-1 / s_a, 0.0, 1 / s_a, 0.0, 0.0, 0.0, 0.0, (2 - 10 / 3) / s_c, (4 - 10 / 3) / s_c,
                (4 - 10 / 3) / s_c]
    assert adv.tolist() == pytest.approx(expected, abs=1e-6)
    assert valid.tolist() == [True, True, True, False, False, False, False, True, True, True]
    assert stats.none_count == 1 and stats.nan_count == 1 and stats.inf_count == 1
    assert stats.ineligible_count == 3 and stats.eligible_count == 7
    assert stats.eligible_fraction == pytest.approx(0.7)
    assert stats.num_groups == 3 and stats.skipped_groups == 1 and stats.valid_count == 6
    assert stats.adv_abs_max == pytest.approx(math.sqrt(2), abs=1e-6)


def test_group_advantages_eps_and_clip():
    # [0, 10]: mean 5, std 5 -> raw (+-5)/(5+1) = +-0.8333; a_max 0.5 clips both
    adv, valid, stats = group_advantages([0.0, 10.0], [0, 0], a_max=0.5, eps=1.0)
    assert adv.tolist() == pytest.approx([-0.5, 0.5])
    assert stats.adv_clipped_fraction == 1.0 and stats.clipped_count == 2
    adv, _, stats = group_advantages([0.0, 10.0], [0, 0], a_max=5.0, eps=1.0)
    assert adv.tolist() == pytest.approx([-5 / 6, 5 / 6])
    assert stats.adv_clipped_fraction == 0.0


def test_all_ineligible_group_is_skipped_and_counted():
    adv, valid, stats = group_advantages([None, float("nan"), 1.0, 3.0], [0, 0, 1, 1], a_max=5, eps=0)
    assert valid.tolist() == [False, False, True, True]
    assert adv.tolist() == pytest.approx([0.0, 0.0, -1.0, 1.0])
    assert stats.skipped_groups == 1 and stats.ineligible_count == 2


def test_equal_rewards_give_zero_advantage_but_valid():
    adv, valid, stats = group_advantages([0.7, 0.7, 0.7], [1, 1, 1], a_max=5, eps=1e-4)
    assert adv.tolist() == [0.0, 0.0, 0.0]
    assert valid.all() and stats.zero_std_groups == 1


def test_rewards_equal_up_to_rounding_are_zero_spread():
    """0.1 + 0.2 vs 0.3 (spread 2.6e-17): with eps 0 these were advantages of +-1.4 around a nonzero mean."""
    for eps in (0.0, 1e-4):
        adv, valid, stats = group_advantages([0.3, 0.1 + 0.2, 0.3], [0, 0, 0], a_max=5.0, eps=eps)
        assert adv.tolist() == [0.0, 0.0, 0.0] and valid.all() and stats.zero_std_groups == 1
    # the threshold scales with |mean|: 1e6 + one ulp-ish noise is zero spread, a real 1e-6 spread is not
    adv, _, stats = group_advantages([1e6, 1e6 + 1e-7, 1e6], [0, 0, 0], a_max=5.0, eps=1e-4)
    assert stats.zero_std_groups == 1 and adv.abs().max() == 0
    adv, _, stats = group_advantages([0.5, 0.5 + 2e-6], [0, 0], a_max=5.0, eps=1e-4)
    # s_r = 1e-6 > 1e-12: raw = (-+1e-6) / (1e-6 + 1e-4) = -+1/101 (eps keeps it small)
    assert stats.zero_std_groups == 0 and adv.tolist() == pytest.approx([-1 / 101, 1 / 101], rel=1e-4)


def test_group_advantages_bad_input():
    with pytest.raises(ValueError, match="group ids"):
        group_advantages([1.0, 2.0], [0], a_max=1, eps=0)
    with pytest.raises(ValueError, match="a_max"):
        group_advantages([1.0, 2.0], [0, 0], a_max=0, eps=0)


def test_clipped_policy_loss_hand_computed():
    # log-ratios: ln 1.5, ln 0.5, 0, ln 1.1 ; advantages 1, 1, -2, -1 ; delta = 0.2
    lr = torch.tensor([math.log(1.5), math.log(0.5), 0.0, math.log(1.1)], dtype=torch.float64)
    old = torch.tensor([-3.0, 2.0, 0.5, 7.0], dtype=torch.float64)
    logp = (old + lr).requires_grad_(True)
    adv = torch.tensor([1.0, 1.0, -2.0, -1.0], dtype=torch.float64)
    loss, clip_frac, approx_kl = clipped_policy_loss(logp, old, adv, 0.2)
    # per item min(rho A, clip(rho) A): min(1.5, 1.2)=1.2; min(0.5, 0.8)=0.5; -2; min(-1.1, -1.1)=-1.1
    assert float(loss.detach()) == pytest.approx(-(1.2 + 0.5 - 2.0 - 1.1) / 4)
    assert float(clip_frac) == pytest.approx(0.5)  # items 0 and 1 are outside [0.8, 1.2]
    rho = [1.5, 0.5, 1.0, 1.1]
    assert float(approx_kl) == pytest.approx(sum((r - 1) - math.log(r) for r in rho) / 4)
    loss.backward()
    # d/dlogp of -(1/4) * term: clipped item 0 -> 0; item 1 -> -(1/4)*rho*A = -0.125;
    # item 2 -> -(1/4)*1*(-2) = 0.5 ; item 3 -> -(1/4)*1.1*(-1) = 0.275
    assert logp.grad.tolist() == pytest.approx([0.0, -0.125, 0.5, 0.275])


def test_clipped_policy_loss_on_policy_equals_minus_mean_advantage():
    logp = torch.tensor([1e4, -2e4, 3.0])
    adv = torch.tensor([0.3, -1.0, 2.0])
    loss, clip_frac, approx_kl = clipped_policy_loss(logp, logp.clone(), adv, 1e-4)
    assert float(loss) == pytest.approx(-float(adv.mean()))
    assert float(clip_frac) == 0.0 and float(approx_kl) == 0.0


def test_clipped_policy_loss_huge_log_ratio_stays_finite():
    loss, _, _ = clipped_policy_loss(torch.tensor([5000.0, 0.0]), torch.tensor([0.0, 0.0]),
                                     torch.tensor([-1.0, 0.0]), 0.2)
    assert torch.isfinite(loss)


def test_clipped_policy_loss_shape_error():
    with pytest.raises(ValueError, match="shapes differ"):
        clipped_policy_loss(torch.zeros(2), torch.zeros(3), torch.zeros(2), 0.2)


def test_mean_kl_hand_computed_and_weight_mask():
    mean = torch.tensor([[1.0, 2.0], [3.0, 5.0]])
    ref = torch.tensor([[0.0, 2.0], [1.0, 1.0]])
    ref_std = torch.tensor([[1.0, 1.0], [0.5, 2.0]])
    # ((1)/1)^2=1, 0, (2/0.5)^2=16, (4/2)^2=4 -> mean 21/4
    assert float(mean_kl(mean, ref, ref_std, eps=1e-12)) == pytest.approx(21 / 4)
    # drop the second row (a "conditioning frame"): mean over [1, 0] = 0.5
    w = torch.tensor([[1.0], [0.0]])
    assert float(mean_kl(mean, ref, ref_std, eps=1e-12, weight_mask=w)) == pytest.approx(0.5)
    # eps enters the denominator: (1/(1+1))^2 = 0.25 ; (0)^2 -> mean 0.125
    assert float(mean_kl(mean, ref, ref_std, eps=1.0, weight_mask=w)) == pytest.approx(0.125)


def test_mean_kl_conditioning_frames_with_zero_std_do_not_blow_up():
    # 5D latents, frame 0 is a conditioning frame with ref std 0 and a mean mismatch there
    mean = torch.zeros(1, 2, 3, 2, 2, requires_grad=True)
    ref = torch.zeros(1, 2, 3, 2, 2)
    ref[:, :, 0] = 1.0
    ref_std = torch.ones(1, 2, 3, 2, 2)
    ref_std[:, :, 0] = 0.0
    cond_mask = torch.tensor([0.0, 1.0, 1.0]).view(1, 1, 3, 1, 1)
    val = mean_kl(mean, ref, ref_std, eps=1e-8, weight_mask=cond_mask)
    assert float(val.detach()) == 0.0
    val.backward()
    assert torch.isfinite(mean.grad).all()


def test_clipped_policy_loss_negative_advantages_on_both_sides_of_the_clip():
    """The pessimistic min with A < 0: a ratio below 1 - delta is clipped (no gradient: the policy already
    made the bad sample less likely), a ratio above 1 + delta is not (its gradient pushes the ratio down);
    with A > 0 the roles swap. delta = 0.2, rho = 0.5, 1.5, 0.5, 1.5, 1.5; A = -1, -1, 2, 2, 0."""
    rho = [0.5, 1.5, 0.5, 1.5, 1.5]
    adv = torch.tensor([-1.0, -1.0, 2.0, 2.0, 0.0], dtype=torch.float64)
    logp = torch.tensor([math.log(r) for r in rho], dtype=torch.float64, requires_grad=True)
    loss, clip_frac, _ = clipped_policy_loss(logp, torch.zeros(5, dtype=torch.float64), adv, 0.2)
    # min(rho A, clip(rho) A): min(-0.5, -0.8) = -0.8; min(-1.5, -1.2) = -1.5; min(1.0, 1.6) = 1.0;
    # min(3.0, 2.4) = 2.4; 0
    assert float(loss.detach()) == pytest.approx(-(-0.8 - 1.5 + 1.0 + 2.4 + 0.0) / 5)
    assert float(clip_frac) == 1.0  # every ratio is outside [0.8, 1.2], whichever branch the min takes
    loss.backward()
    # d/dlogp of -(1/5) rho A where the unclipped branch is taken, else 0
    assert logp.grad.tolist() == pytest.approx([0.0, 1.5 / 5, -1.0 / 5, 0.0, 0.0])


def test_group_advantages_interleaved_groups_and_two_eligible():
    # group 7 at positions 0, 2, 4 (eligible 4 and 0: mean 2, std 2); group 3 at 1, 3 (both eligible, equal)
    adv, valid, stats = group_advantages([4.0, 1.0, 0.0, 1.0, None], [7, 3, 7, 3, 7], a_max=5.0, eps=0.5)
    assert adv.tolist() == pytest.approx([2 / 2.5, 0.0, -2 / 2.5, 0.0, 0.0])
    assert valid.tolist() == [True, True, True, True, False]
    assert stats.zero_std_groups == 1 and stats.skipped_groups == 0 and stats.valid_count == 4


def test_mean_kl_gradient_hand_computed():
    # d/dmu mean_w(((mu - ref) / (s + eps))^2) = 2 (mu - ref) / (s + eps)^2 / (weighted count), 0 off the mask
    mean = torch.tensor([[1.0, 2.0], [3.0, 5.0]], requires_grad=True)
    ref = torch.tensor([[0.0, 2.0], [1.0, 1.0]])
    ref_std = torch.tensor([[1.0, 1.0], [0.5, 2.0]], requires_grad=True)
    w = torch.tensor([[1.0], [0.0]])
    mean_kl(mean, ref, ref_std, eps=1.0, weight_mask=w).backward()
    # 2 weighted elements; (1 - 0) / (1 + 1) at [0, 0], a zero residual at [0, 1], row 1 off the mask
    assert mean.grad.flatten().tolist() == pytest.approx([2 * 1 / 4 / 2, 0.0, 0.0, 0.0])
    assert ref_std.grad is None  # the reference is a constant


def test_clamped_log_ratio_keeps_the_gradient_of_the_unclipped_branch():
    """The clamp before exp bounds the ratio's value and the size of its gradient, never its existence: where
    the min takes the unclipped branch (A < 0 with rho above 1 + delta, A > 0 with rho below 1 - delta) the
    clipped objective still pushes rho back, however far out it is. max_log_ratio 2, log-ratios +-3, delta 0.2.
    Items: (3, A=-1) unclipped; (-3, A=1) unclipped; (3, A=1) clipped; (-3, A=-1) clipped."""
    e2 = math.exp(2.0)
    logp = torch.tensor([3.0, -3.0, 3.0, -3.0], dtype=torch.float64, requires_grad=True)
    adv = torch.tensor([-1.0, 1.0, 1.0, -1.0], dtype=torch.float64)
    loss, clip_frac, approx_kl = clipped_policy_loss(logp, torch.zeros(4, dtype=torch.float64), adv, 0.2,
                                                     max_log_ratio=2.0)
    # values at the clamp (rho = e^2 or e^-2): min(-e^2, -1.2); min(e^-2, 0.8); min(e^2, 1.2); min(-e^-2, -0.8)
    assert float(loss.detach()) == pytest.approx(-(-e2 + 1 / e2 + 1.2 - 0.8) / 4)
    assert float(clip_frac) == 1.0
    assert float(approx_kl) == pytest.approx(((e2 - 1 - 2) + (1 / e2 - 1 + 2)) / 2)
    loss.backward()
    # d/dlogp of -(1/4) rho A on the unclipped branch, rho at its clamped value; 0 on the clipped branch
    assert logp.grad.tolist() == pytest.approx([e2 / 4, -1 / e2 / 4, 0.0, 0.0])


def test_clipped_policy_loss_infinite_log_prob_and_bad_bound():
    logp = torch.tensor([math.inf, 0.0], dtype=torch.float64, requires_grad=True)
    loss, _, _ = clipped_policy_loss(logp, torch.zeros(2, dtype=torch.float64),
                                     torch.tensor([0.0, 1.0], dtype=torch.float64), 0.2)
    assert torch.isfinite(loss)  # an infinite log-ratio is bounded, not turned into inf - inf = NaN
    loss.backward()
    assert torch.isfinite(logp.grad).all()
    with pytest.raises(ValueError, match="max_log_ratio"):
        clipped_policy_loss(torch.zeros(1), torch.zeros(1), torch.ones(1), 0.2, max_log_ratio=0.0)
