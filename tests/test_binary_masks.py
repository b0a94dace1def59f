"""Which masks are 0/1 and which are fractional (DESIGN.md §5-6).

The DynDiff mask M is fractional by construction (r_base <= M <= 1, its D part continuous) and its part B is
0/1. The conditioning mask (``cond_mask``, the ``weight_mask`` of the log-likelihood and the mu-KL) says
whether a latent frame is generated (1) or a condition (0): nothing lies between. Before, a fractional one was
taken three ways at once: ``gaussian_log_prob`` counted any nonzero weight as a whole element, ``mean_kl``
weighed it (a weighted mean), and ``transition_mean_std`` blended the mean towards x_t and scaled the std by
it. Each now refuses it, naming the mask."""

from __future__ import annotations

import math

import pytest
import torch

from policy.conditioning import Conditioning, make_cond_mask
from policy.dyndiff import DynDiffInputError, gaussian_log_prob, transition_mean_std
from training.grpo import mean_kl

HALF = torch.tensor([0.0, 0.5]).view(1, 1, 2, 1, 1)  # a "half-generated" frame 1


def test_gaussian_log_prob_refuses_a_fractional_weight_mask():
    x, mean, std = torch.ones(1, 1, 2, 1, 1), torch.zeros(1, 1, 2, 1, 1), torch.ones(1, 1, 2, 1, 1)
    # the 0/1 mask: frame 1 alone, -1/2 - log sqrt(2 pi) (hand value)
    want = -0.5 - 0.5 * math.log(2 * math.pi)
    assert float(gaussian_log_prob(x, mean, std, weight_mask=(HALF > 0).float())) == pytest.approx(want)
    with pytest.raises(DynDiffInputError, match="weight_mask.*0 or 1"):
        gaussian_log_prob(x, mean, std, weight_mask=HALF)


def test_mean_kl_refuses_a_fractional_weight_mask_and_normalises_by_the_kept_elements():
    mean, ref = torch.tensor([3.0, 1.0]).view(1, 1, 2, 1, 1), torch.zeros(1, 1, 2, 1, 1)
    ref_std = torch.full((1, 1, 2, 1, 1), 0.5)
    # 0/1 mask [1, 1] -> ((3 / 0.5)^2 + (1 / 0.5)^2) / 2 = (36 + 4) / 2; [0, 1] -> 4 / 1
    assert float(mean_kl(mean, ref, ref_std, 1e-12)) == pytest.approx(20.0)
    assert float(mean_kl(mean, ref, ref_std, 1e-12, weight_mask=(HALF > 0).float())) == pytest.approx(4.0)
    with pytest.raises(ValueError, match="weight_mask.*0 or 1"):
        mean_kl(mean, ref, ref_std, 1e-12, weight_mask=HALF)


def test_transition_refuses_a_fractional_cond_mask():
    x = torch.randn(1, 2, 2, 2, 2, generator=torch.Generator().manual_seed(0))
    mask = torch.full((1, 1, 2, 2, 2), 0.5)
    with pytest.raises(DynDiffInputError, match="cond_mask.*0 or 1"):
        transition_mean_std(x, torch.zeros_like(x), 0.8, 0.6, mask, cond_mask=HALF)


def test_conditioning_refuses_a_fractional_cond_mask():
    ff, text = torch.zeros(1, 2, 1, 2, 2), torch.zeros(1, 3, 4)
    assert Conditioning(ff, text, make_cond_mask(1, 2)).num_latent_frames == 2
    with pytest.raises(ValueError, match="cond_mask.*0 or 1"):
        Conditioning(ff, text, HALF)
