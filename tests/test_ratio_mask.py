"""ratio_mask: the binary part B of the update's mask, the current policy's own ("own", DESIGN.md §6) or
the rollout's ("rollout"), and the logged mask_flip_fraction (policy/dyndiff.py, policy/rollout.py)."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch

from policy.dyndiff import (
    DynDiffInputError,
    dynamic_mask,
    gaussian_log_prob,
    predict_x0,
    transition_mean_std,
)
from policy.dyndiff_mask import dynamic_mask_parts
from policy.rollout import RolloutConfig, RolloutConfigError, mask_flip_fraction, rollout, step_log_prob
from policy.world_model import FlowWorldModel
from training.config import ConfigError, TrainConfig
from training.config_io import config_from_dict
from training.update import rollout_config, take

OWN = RolloutConfig(num_steps=6, sde_window=(0, 3))
ROLLOUT = dataclasses.replace(OWN, ratio_mask="rollout")


def test_dynamic_mask_parts_hand_computed():
    # dX = [0, 0, 0, 4] over 1x4 positions -> D = [0, 0, 0, 1], tau 0.5 -> B = [0, 0, 0, 1] (test_dyndiff)
    dx = torch.tensor([0.0, 0.0, 0.0, 4.0]).view(1, 1, 1, 1, 4)
    m, b = dynamic_mask_parts(dx, tau=0.5, r_base=0.2)
    assert b.dtype == torch.bool and b.flatten().tolist() == [False, False, False, True]
    assert torch.equal(m, dynamic_mask(dx, tau=0.5, r_base=0.2))
    # another B inside M: M = 0.2 + 0.8 (0.5 D + 0.5 B') with B' = [1, 0, 0, 0]; the returned B is D's own
    other = torch.tensor([True, False, False, False]).view(1, 1, 1, 1, 4)
    m2, b2 = dynamic_mask_parts(dx, tau=0.5, r_base=0.2, binary=other)
    assert m2.flatten().tolist() == pytest.approx([0.6, 0.2, 0.2, 0.6])
    assert torch.equal(b2, b)
    with pytest.raises(DynDiffInputError, match="binary"):
        dynamic_mask_parts(dx, tau=0.5, r_base=0.2, binary=other.view(1, 1, 1, 4, 1))


def test_a_given_binary_part_replaces_the_own_one_when_gradients_flow_too():
    """The autograd path (D differentiable, as in the loss) uses the given B as the no-grad path does."""
    dx = torch.tensor([0.0, 0.0, 0.0, 4.0]).view(1, 1, 1, 1, 4).requires_grad_()
    other = torch.tensor([True, False, False, False]).view(1, 1, 1, 1, 4)
    m, b = dynamic_mask_parts(dx, tau=0.5, r_base=0.2, binary=other)
    assert m.requires_grad and m.detach().flatten().tolist() == pytest.approx([0.6, 0.2, 0.2, 0.6])
    assert b.flatten().tolist() == [False, False, False, True]


def test_mask_flip_fraction_hand_computed():
    own = torch.zeros(2, 1, 2, 1, 4, dtype=torch.bool)
    recorded = own.clone()
    recorded[0, 0, 1, 0, :2] = True  # sample 0: 2 of its 4 generated positions differ
    recorded[:, 0, 0] = True  # conditioning frame 0: differences there do not count
    keep = torch.tensor([0.0, 1.0]).view(1, 1, 2, 1, 1).expand(2, 1, 2, 1, 1)
    assert mask_flip_fraction(own, recorded, keep).tolist() == [0.5, 0.0]
    assert mask_flip_fraction(own, own, keep).tolist() == [0.0, 0.0]


@pytest.fixture(scope="module")
def nudged():
    """A tiny Cosmos rollout (3 samples, 16x16 latent positions) and a copy of its model nudged by 1e-4 per
    parameter: enough to flip B at a position near the quantile (seeded; found by trying)."""
    torch.manual_seed(0)
    model = FlowWorldModel.tiny_cosmos().eval()
    imgs = np.random.default_rng(0).integers(0, 256, (1, 128, 128, 3), dtype=np.uint8)
    cond = model.encode_prompts(imgs, ["pick"], num_frames=9).repeat_interleave(3)
    ro = rollout(model, cond, OWN, generator=torch.Generator().manual_seed(0))
    moved = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in moved.transformer.parameters():
            p.add_(1e-4 * torch.sign(torch.randn(p.shape, generator=gen)))
    return model, moved, cond, ro


def test_records_carry_the_rollout_binary_mask(nudged):
    model, _, cond, ro = nudged
    assert ro.steps[0].binary_mask is None and ro.steps[0].prev_x0_hat is None  # D = B = 0 there
    for rec in ro.steps[1:]:
        b = rec.binary_mask
        assert b is not None and b.dtype == torch.bool and b.shape == (3, 1, *rec.x_t.shape[2:])
        assert b[:, :, 1:].any()  # B = 1 above the tau-quantile of generated frames
        part = take(rec, slice(1, 3), 3)  # an update micro-batch slices it with the rest
        assert torch.equal(part.binary_mask, b[1:3])


def test_identical_recompute_flips_nothing_and_both_modes_agree(nudged):
    model, _, cond, ro = nudged
    with torch.no_grad():
        for rec in ro.steps:
            lp_own, _, _, flips_own = step_log_prob(model, cond, rec, OWN)
            lp_rol, _, _, flips_rol = step_log_prob(model, cond, rec, ROLLOUT)
            assert flips_own.tolist() == [0.0, 0.0, 0.0] and flips_rol.tolist() == [0.0, 0.0, 0.0]
            assert torch.equal(lp_own, lp_rol)
            assert torch.allclose(lp_own, rec.log_prob, atol=1e-3)


def test_default_own_mask_gives_the_old_log_prob(nudged):
    # "own" is what step_log_prob computed before ratio_mask existed: the whole mask from the current policy
    _, moved, cond, ro = nudged
    assert RolloutConfig().ratio_mask == "own" and TrainConfig().ratio_mask == "own"
    rec = ro.steps[1]
    with torch.no_grad():
        lp, mean, std, _ = step_log_prob(moved, cond, rec, OWN)
        v = moved.velocity(rec.x_t, rec.sigma, cond)
        mask = dynamic_mask(predict_x0(rec.x_t, v, rec.sigma) - rec.prev_x0_hat, OWN.tau, OWN.r_base)
        keep = cond.cond_mask.float()
        want_mean, want_std = transition_mean_std(rec.x_t, v, rec.sigma, rec.sigma_next, mask, cond_mask=keep)
        want = gaussian_log_prob(rec.x_next, want_mean, want_std, weight_mask=keep)
    assert torch.equal(mean, want_mean) and torch.equal(std, want_std) and torch.equal(lp, want)


def test_rollout_mask_keeps_the_log_ratio_small_after_a_nudge(nudged):
    _, moved, cond, ro = nudged
    rec = ro.steps[1]
    with torch.no_grad():
        lp_own, _, _, flips = step_log_prob(moved, cond, rec, OWN)
        lp_rol, _, _, flips_rol = step_log_prob(moved, cond, rec, ROLLOUT)
    own_ratio, rol_ratio = (lp_own - rec.log_prob).abs(), (lp_rol - rec.log_prob).abs()
    assert torch.equal(flips, flips_rol)  # the metric measures the same thing in both modes
    flipped = flips > 0
    assert flipped.any()  # the nudge moved B at some position near the quantile
    assert float(own_ratio[flipped].max()) > 5.0  # each flip costs several nats under "own"
    assert float(rol_ratio.max()) < 1.0  # "rollout" keeps B: only the small change of D and the mean
    # samples without a flip: both modes compute the same mask, hence the same log-prob
    assert torch.equal(lp_own[~flipped], lp_rol[~flipped])


def test_rollout_mask_needs_the_recorded_binary_mask(nudged):
    model, _, cond, ro = nudged
    rec = dataclasses.replace(ro.steps[1], binary_mask=None)
    with pytest.raises(ValueError, match="binary_mask"):
        step_log_prob(model, cond, rec, ROLLOUT)
    step_log_prob(model, cond, rec, OWN)  # "own" does not need it (flips are then reported as 0)


def test_ratio_mask_setting_is_validated_and_reaches_the_sampler():
    with pytest.raises(RolloutConfigError, match="ratio_mask"):
        RolloutConfig(ratio_mask="old")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="ratio_mask"):
        config_from_dict({"ratio_mask": "old"})
    assert rollout_config(dataclasses.replace(TrainConfig(), ratio_mask="rollout", shift=3.0)).ratio_mask == "rollout"
