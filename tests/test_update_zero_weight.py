"""Micro-batches whose samples all weigh zero (training/update.py's module docstring): an exact zero loss,
counted, and a non-finite forward of an invalid sample reported to the divergence guard (``nonfinite_losses``)
instead of reaching the optimizer unannounced. Same stand-in engine as tests/test_update_phase.py."""

from __future__ import annotations

import torch

from tests.test_train_parts import _part
from tests.test_update_phase import Engine, _cfg, _groups, one_rank_group  # noqa: F401 (the fixture)
from training.metrics import summarize
from training.update import update_policy


class Recording(Engine):
    """Also keeps every loss handed to backward."""

    def __init__(self, grad_accum: int) -> None:
        super().__init__(grad_accum)
        self.losses: list[float] = []

    def backward(self, loss: torch.Tensor) -> None:
        self.losses.append(float(loss.detach()))
        super().backward(loss)


def _run(groups, grad_accum: int) -> tuple[Recording, object]:  # noqa: ANN001
    engine = Recording(grad_accum)
    log = update_policy(engine, groups, _cfg(5, 1), rcfg=None, reference=None, iteration=0, grad_accum=grad_accum,
                        device=torch.device("cpu"))
    return engine, log


def test_a_micro_batch_without_valid_samples_has_an_exact_zero_loss_and_is_counted():
    engine, log = _run(_groups([[1, 1, 0, 1, 1], [0, 0, 0, 0, 0]], sde_steps=1), grad_accum=2)
    assert len(engine.losses) == 2 and engine.losses.count(0.0) == 1  # the valid micro-batch's is not 0
    assert log.empty_micro_batches == 1 and log.nonfinite_ignored == 0
    assert len(log.losses) == 1 and torch.isfinite(engine.step_grads[0]).all()


def test_all_zero_advantages_give_a_zero_loss_and_zero_gradient():
    groups = _groups([[1] * 5], sde_steps=1)
    groups[0].advantages.zero_()  # a zero-spread group: valid, no signal
    engine, log = _run(groups, grad_accum=1)
    assert engine.losses == [0.0] and log.losses == [0.0]  # pins behaviour that was already right
    assert torch.equal(engine.step_grads[0], torch.zeros(4, dtype=torch.float64))


class NaNNetwork(Recording):
    """A network whose forward is NaN on the one row a micro-batch without a valid sample runs, whatever its
    (finite) input: the policy itself is no longer finite there."""

    def __call__(self, cond, record, rcfg):  # noqa: ANN001, ANN204 (engine call)
        lp, mean, std, flips = super().__call__(cond, record, rcfg)
        return (lp * float("nan"), mean, std, flips) if cond.n == 1 else (lp, mean, std, flips)


def test_a_non_finite_invalid_sample_is_not_a_silent_nan():
    groups = _groups([[1] * 5, [0] * 5], sde_steps=1)
    engine = NaNNetwork(grad_accum=2)
    log = update_policy(engine, groups, _cfg(5, 1), rcfg=None, reference=None, iteration=0, grad_accum=2,
                        device=torch.device("cpu"))
    assert all(loss == loss for loss in engine.losses)  # the zero loss is 0, not 0 * NaN
    assert log.empty_micro_batches == 1 and log.nonfinite_ignored == 1
    row = summarize(0, [_part([1.0, 2.0], loss=log.losses, item_counts=log.item_counts,
                              nonfinite_ignored=log.nonfinite_ignored)])
    assert row["nonfinite_losses"] == 1  # what nonfinite_loss: stop reads; the logged losses are all finite


def test_an_invalid_sample_with_nan_latents_runs_the_collectives_forward_on_finite_inputs():
    """A diverged (ineligible) rollout's NaN record is not the network's NaN: the forward for the collectives runs
    on its values set to 0 (training/update.py ``finite_inputs``), so nothing non-finite reaches the step."""
    groups = _groups([[1] * 5, [0] * 5], sde_steps=1)
    groups[1].rollout.steps[0].x[0, 0] = float("nan")  # an ineligible sample whose likelihood is NaN
    engine, log = _run(groups, grad_accum=2)
    assert log.empty_micro_batches == 1 and log.nonfinite_ignored == 0
    assert torch.isfinite(engine.step_grads[0]).all()


def test_an_optimizer_step_without_a_valid_sample_is_not_taken():
    """optimizer_steps_per_epoch > 1 can leave an optimizer step whose micro-batches hold no valid sample on
    any rank: its zero gradient would still be an AdamW step (momentum and weight decay move the weights with
    no data behind them). 2 groups x 1 SDE step x 1 micro-batch, one micro-batch per step: group 1 is all
    invalid, so one of the two steps is empty and neither runs its micro-batch nor steps."""
    engine, log = _run(_groups([[1, 1, 0, 1, 1], [0] * 5], sde_steps=1), grad_accum=1)
    assert engine.calls == 1 and engine.micro == 1  # only the step with valid samples ran
    assert len(engine.step_grads) == 1 and engine.step_grads[0].abs().sum() > 0
    assert log.empty_steps == 1 and log.empty_micro_batches == 0 and len(log.grad_norms) == 1


def test_empty_optimizer_steps_reach_the_metrics_row():
    """``UpdateLog.empty_steps`` was counted but written to no metrics row: an iteration whose optimizer steps
    were mostly skipped looked like a normal one. `metric_parts` is what the trainer gathers from the update."""
    from training.update import metric_parts

    _, log = _run(_groups([[1, 1, 0, 1, 1], [0] * 5], sde_steps=1), grad_accum=1)
    row = summarize(0, [_part([1.0, 2.0], **metric_parts(log)), _part([1.0, 2.0], **metric_parts(log))])
    assert row["empty_steps"] == 1  # the same count on every rank (all-reduced): rank 0's, not a sum
    assert row["loss"] == log.losses[0] and row["update_skipped"] == 0
    _, full = _run(_groups([[1] * 5, [1] * 5], sde_steps=1), grad_accum=1)
    assert summarize(0, [_part([1.0, 2.0], **metric_parts(full))])["empty_steps"] == 0
