"""Boundary cases of the GRPO / DynDiff maths not pinned elsewhere (tests/test_grpo.py, tests/test_dyndiff.py):
a group of one, a ratio exactly at the clip bound, the schedule's ends, an all-static motion field, and the
logged row when one rank has no eligible sample. Hand-computed values; CPU, tiny, seeded."""

from __future__ import annotations

import math

import pytest
import torch

from policy.dyndiff import gaussian_log_prob, hybrid_step
from policy.dyndiff_mask import dynamic_mask_parts
from training.grpo import clipped_policy_loss, group_advantages
from training.metrics import summarize


def test_a_group_of_one_gives_no_update():
    adv, valid, stats = group_advantages([0.9, 0.1, 0.5], ["solo", "pair", "pair"], a_max=5.0, eps=0.0)
    # "solo": n = 1 < 2 -> skipped; "pair" [0.1, 0.5]: mean 0.3, std 0.2 -> -1, +1
    assert valid.tolist() == [False, True, True]
    assert adv.tolist() == pytest.approx([0.0, -1.0, 1.0])
    assert stats.skipped_groups == 1 and stats.valid_count == 2 and stats.eligible_count == 3


def test_ratio_exactly_at_the_clip_bound_keeps_its_gradient_and_is_not_counted_clipped():
    # rho = 1.2 with A = 1 and rho = 0.8 with A = -1 (delta 0.2): both branches equal rho * A, neither clips
    lp = torch.tensor([math.log(1.2), math.log(0.8)], dtype=torch.float64, requires_grad=True)
    loss, clip_frac, _ = clipped_policy_loss(lp, torch.zeros(2, dtype=torch.float64),
                                             torch.tensor([1.0, -1.0], dtype=torch.float64), 0.2)
    assert float(loss.detach()) == pytest.approx(-(1.2 - 0.8) / 2)
    assert float(clip_frac) == 0.0
    loss.backward()
    # d/dlp of -(1/2) rho A = -(1/2) rho A: -0.6 and +0.4 (the whole gradient, not half of it at the tie)
    assert lp.grad.tolist() == pytest.approx([-0.6, 0.4])


@pytest.mark.parametrize("m", [0.0, 0.5, 1.0])
def test_the_last_step_to_sigma_0_is_x0_hat_and_carries_no_likelihood(m):
    x = torch.randn(1, 2, 2, 3, 3, generator=torch.Generator().manual_seed(0))
    v = torch.randn(1, 2, 2, 3, 3, generator=torch.Generator().manual_seed(1))
    st = hybrid_step(x, v, 1.0, 0.0, torch.full((1, 1, 2, 3, 3), m), noise=torch.randn_like(x))
    # s = 1 -> s_next = 0: sn = 0, mean = x0_hat = x - v whatever the mask, sample = mean
    assert torch.allclose(st.sample, x - v, atol=1e-6) and torch.allclose(st.mean, x - v, atol=1e-6)
    assert float(st.std.abs().max()) == 0.0
    for reduce in ("sum", "mean"):  # every element has std 0: excluded, never -inf or NaN
        assert float(gaussian_log_prob(st.sample, st.mean, st.std, reduce)) == 0.0


def test_first_noise_level_full_mask_drops_the_eps_term():
    x = torch.randn(1, 2, 1, 2, 2, generator=torch.Generator().manual_seed(2))
    v = torch.randn(1, 2, 1, 2, 2, generator=torch.Generator().manual_seed(3))
    st = hybrid_step(x, v, 1.0, 0.9, torch.ones(1, 1, 1, 2, 2), noise=torch.zeros_like(x))
    # M = 1: sn = s_next, sqrt(s_next^2 - sn^2) = 0 -> mean = x0_hat (1 - 0.9), x0_hat = x - 1 * v
    assert torch.allclose(st.mean, 0.1 * (x - v), atol=1e-6)
    assert torch.allclose(st.std, torch.full_like(x, 0.9))


@pytest.mark.parametrize("fill", [0.0, 1.0])
@pytest.mark.parametrize("grad", [False, True])
def test_a_motion_field_without_spatial_variation_gives_r_base_everywhere(fill, grad):
    # dX = 0 (nothing moved) or dX = 1 everywhere (a global shift): R = 0, zero range -> D = B = 0, M = r_base
    delta = torch.full((1, 3, 2, 4, 4), fill, requires_grad=grad)
    mask, binary = dynamic_mask_parts(delta, tau=0.5, r_base=0.3)
    assert torch.allclose(mask, torch.full_like(mask, 0.3)) and not bool(binary.any())
    if grad:
        mask.sum().backward()
        assert torch.isfinite(delta.grad).all()


def _part(rewards, advantages, losses, counts, mu_kls):
    return {"rewards": rewards, "advantages": advantages, "adv_clipped": 0, "skipped_groups": 0,
            "zero_std_groups": 0, "clip_fraction": [0.0] * len(losses), "approx_kl": [0.0] * len(losses),
            "mu_kl": mu_kls, "loss": losses, "item_counts": counts, "grad_norms": [1.0], "mask_flip_fraction": [],
            "mask_flip_counts": [], "update_skipped": False, "nonfinite_ignored": 0, "empty_steps": 0,
            "mask_mean": [], "diversity": [], "diversity_frames": [], "seconds_rollout": 0.0,
            "seconds_reward": 0.0, "seconds_update": 0.0, "lr": 1e-4, "components": {}, "usage": {},
            "ineligible_none": 0, "ineligible_nan": 0, "ineligible_inf": 0, "ineligible_error": 0}


def test_a_rank_without_eligible_samples_leaves_the_other_ranks_means_alone():
    # rank 0: rewards [0, 1] (advantages -1, +1), micro-batch losses 2.0 (1 item) and 5.0 (3 items);
    # rank 1: every reward ineligible, no update item
    parts = [_part([0.0, 1.0], [-1.0, 1.0], [2.0, 5.0], [1, 3], [0.5, 1.5]),
             {**_part([None, None], [], [], [], []), "ineligible_none": 2}]
    row = summarize(3, parts)
    assert row["reward_mean"] == pytest.approx(0.5) and row["reward_std"] == pytest.approx(0.5)
    assert row["eligible_fraction"] == pytest.approx(0.5) and row["ineligible_count"] == 2
    assert row["ineligible_none"] == 2
    assert row["adv_mean"] == pytest.approx(0.0) and row["adv_std"] == pytest.approx(1.0)
    assert row["loss"] == pytest.approx((2.0 * 1 + 5.0 * 3) / 4)  # weighted by items, rank 1 adds none
    assert row["mu_kl"] == pytest.approx((0.5 * 1 + 1.5 * 3) / 4)
    assert row["nonfinite_losses"] == 0


def test_an_all_none_group_and_a_single_valid_group_among_nones_give_no_update():
    """DESIGN.md §6: n counts eligible rewards only. Group 0: all None (n = 0); group 1: one eligible among
    Nones (n = 1); group 2: [None, 1, 3] -> mean 2, population std 1 -> -1, +1 (the None neither in the mean
    nor in the std: with it as 0 the mean would be 4/3)."""
    rewards = [None, None, None, None, 2.0, None, None, 1.0, 3.0]
    adv, valid, stats = group_advantages(rewards, [0, 0, 0, 1, 1, 1, 2, 2, 2], a_max=5.0, eps=0.0)
    assert valid.tolist() == [False] * 7 + [True, True]
    assert adv.tolist() == pytest.approx([0.0] * 7 + [-1.0, 1.0])
    assert (stats.skipped_groups, stats.valid_count, stats.none_count, stats.eligible_count) == (2, 2, 6, 3)
    assert (stats.adv_mean, stats.adv_std) == pytest.approx((0.0, 1.0))
    adv, valid, stats = group_advantages([None] * 4, [0, 0, 1, 1], a_max=5.0, eps=1e-4)
    assert not valid.any() and adv.abs().sum() == 0 and stats.skipped_groups == 2 and stats.eligible_fraction == 0
