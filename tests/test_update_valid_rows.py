"""training/update.py runs the forwards of a micro-batch on its valid samples only (module docstring): an
invalid sample's zero weight could not keep its NaN forward out of the gradients (0 * NaN = NaN), and its
forward and backward were wasted. A micro-batch without a valid sample runs one sample (ZeRO's collectives).
Same stand-in engine as tests/test_update_phase.py."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tests.test_update_phase import (  # noqa: F401 (one_rank_group: the fixture)
    BETA,
    Engine,
    G,
    KLEngine,
    _cfg,
    _groups,
    _objective_gradient,
    _reference,
    one_rank_group,
)
from training.update import update_policy


def _run(engine: Engine, groups, cfg, grad_accum: int, reference=None):  # noqa: ANN001, ANN202
    return update_policy(engine, groups, cfg, rcfg=None, reference=reference, iteration=0, grad_accum=grad_accum,
                         device=torch.device("cpu"))


def test_a_nan_invalid_sample_beside_a_valid_one_does_not_reach_the_gradients():
    # micro-batches of 2: rows (0, 1) mix the valid sample 0 with the invalid sample 1, whose latents are NaN
    groups = _groups([[1, 0, 0, 0, 0]], sde_steps=1)
    groups[0].rollout.steps[0].x[1] = float("nan")
    engine = Engine(grad_accum=3)  # 3 micro-batches of a group of 5: one optimizer step
    log = _run(engine, groups, _cfg(2, 1), grad_accum=3)
    assert len(engine.step_grads) == 1 and torch.isfinite(engine.step_grads[0]).all()
    assert log.nonfinite_ignored == 0 and log.empty_micro_batches == 2 and log.item_counts == [1]
    # the valid sample alone in its micro-batch (micro_batch = 1) gives the same loss and the same step
    alone = _groups([[1, 0, 0, 0, 0]], sde_steps=1)
    reference = Engine(grad_accum=G)
    ref_log = _run(reference, alone, _cfg(1, 1), grad_accum=G)
    assert log.losses == ref_log.losses and log.clip_fracs == ref_log.clip_fracs
    assert torch.equal(engine.step_grads[0], reference.step_grads[0])
    assert torch.allclose(engine.step_grads[0], _objective_gradient(alone), rtol=1e-12, atol=1e-15)


def test_a_nan_invalid_sample_stays_out_of_the_mu_kl_too():
    groups = _groups([[1, 0, 1, 1, 0]], sde_steps=2)
    for rec in groups[0].rollout.steps:
        rec.x[1] = float("nan")
    cfg = dataclasses.replace(_cfg(G, 2), beta=BETA)
    engine = KLEngine(grad_accum=2)
    log = _run(engine, groups, cfg, grad_accum=2, reference=_reference)
    clean = _groups([[1, 0, 1, 1, 0]], sde_steps=2)
    reference = KLEngine(grad_accum=2)
    ref_log = _run(reference, clean, cfg, grad_accum=2, reference=_reference)
    assert torch.isfinite(engine.step_grads[0]).all() and log.nonfinite_ignored == 0
    assert torch.equal(engine.step_grads[0], reference.step_grads[0])
    assert log.losses == ref_log.losses and log.mu_kls == ref_log.mu_kls and log.mask_flips == ref_log.mask_flips


def test_the_forwards_see_only_the_valid_rows_and_one_row_when_none_is_valid():
    seen: dict[str, list[torch.Tensor]] = {"policy": [], "reference": []}

    class Spy(KLEngine):
        def __call__(self, cond, record, rcfg):  # noqa: ANN001, ANN204
            seen["policy"].append(record.x.clone())
            return super().__call__(cond, record, rcfg)

    def spy_reference(cond, record, rcfg):  # noqa: ANN001, ANN202
        assert cond.n == record.x.shape[0]
        seen["reference"].append(record.x.clone())
        return _reference(cond, record, rcfg)

    groups = _groups([[0, 1, 0, 1, 1], [0, 0, 0, 0, 0]], sde_steps=1)
    cfg = dataclasses.replace(_cfg(3, 1), beta=BETA)  # micro-batches (0, 1, 2), (3, 4) of each group
    log = _run(Spy(grad_accum=4), groups, cfg, grad_accum=4, reference=spy_reference)
    x0, x1 = groups[0].rollout.steps[0].x, groups[1].rollout.steps[0].x
    want = [x0[[1]], x0[3:5], x1[[0]], x1[[3]]]  # mixed: its valid row; all valid: both; none valid: the first
    for who in ("policy", "reference"):  # the reference runs on every micro-batch, on the policy's rows
        assert len(seen[who]) == len(want)
        assert all(sum(torch.equal(got, w) for got in seen[who]) == 1 for w in want)
    assert log.item_counts.count(1) == 1 and log.item_counts.count(2) == 1 and log.empty_micro_batches == 2


def test_forward_rows():
    from training.update import forward_rows  # here, so that the other tests also run against older code

    valid = torch.tensor([1, 0, 1, 1, 1], dtype=torch.bool)
    rows, keep = forward_rows(valid, slice(3, 5))
    assert rows == slice(3, 5) and keep.tolist() == [0, 1]  # all valid: the slice itself, no copy
    rows, keep = forward_rows(valid, slice(0, 2))
    assert rows.tolist() == [0] and keep.tolist() == [0]
    rows, keep = forward_rows(valid, slice(1, 4))
    assert rows.tolist() == [2, 3] and keep.tolist() == [1, 2]  # rows: into the group; keep: the micro-batch
    rows, keep = forward_rows(torch.zeros(5, dtype=torch.bool), slice(2, 4))
    assert rows == slice(2, 3) and keep.tolist() == []  # one row for the collectives, no valid sample


@pytest.mark.parametrize("micro_batch", [2, 3])
def test_every_optimizer_step_is_still_the_objective_gradient_with_nan_invalid_samples(micro_batch):
    groups = _groups([[1, 1, 0, 1, 1], [0, 1, 1, 0, 1]], sde_steps=2)
    want = _objective_gradient(groups)  # before the NaNs: the helper's forward runs on every row
    for g in groups:
        for rec in g.rollout.steps:
            rec.x[~g.valid] = float("nan")
    micro = 2 * 2 * -(-G // micro_batch)
    engine = Engine(grad_accum=micro)
    log = _run(engine, groups, _cfg(micro_batch, 2), grad_accum=micro)
    assert torch.allclose(engine.step_grads[0], want, rtol=1e-12, atol=1e-15)
    assert log.nonfinite_ignored == 0  # no micro-batch here is without a valid sample


def test_a_diverged_invalid_sample_alone_in_its_micro_batch_keeps_the_step_finite():
    """micro_batch 1 (the default): each invalid sample is a micro-batch without a valid sample, whose one forward
    (ZeRO's collectives) ran on that very sample. A diverged rollout (NaN latents, ineligible) made that forward NaN,
    and its exact-zero loss still put 0 * NaN = NaN into the step's gradient: DeepSpeed then drops the whole optimizer
    step (an invalid gradient norm), so with ``nonfinite_loss: skip`` one diverged rollout cost the iteration's update.
    The collectives' forward needs an input, not that sample's values: it now runs on finite ones."""
    groups = _groups([[1, 1, 0, 1, 1], [0, 1, 1, 0, 1]], sde_steps=2)
    want = _objective_gradient(groups)
    for g in groups:
        for rec in g.rollout.steps:
            rec.x[~g.valid] = float("nan")  # the ineligible rollouts diverged
            rec.log_prob[~g.valid] = float("inf")
    micro = 2 * 2 * G  # groups x SDE steps x micro-batches of one sample: one optimizer step
    engine = Engine(grad_accum=micro)
    log = _run(engine, groups, _cfg(1, 2), grad_accum=micro)
    assert len(engine.step_grads) == 1 and torch.isfinite(engine.step_grads[0]).all()
    assert torch.allclose(engine.step_grads[0], want, rtol=1e-12, atol=1e-15)
    assert log.empty_micro_batches == 2 * 3 and log.nonfinite_ignored == 0
    assert torch.isnan(groups[1].rollout.steps[0].x[0]).all()  # the rollout's record itself is left as it was
