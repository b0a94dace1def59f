"""The learning-rate schedule's position after a resume, with fp16 steps DeepSpeed skipped on overflow.

DeepSpeed's ``_take_model_step`` counts every optimizer step in ``global_steps`` but, when the fp16 gradients
overflowed, skips the step, counts it in ``skipped_steps`` and does not step the scheduler. A resume set the
scheduler's position to ``global_steps``: ahead of the uninterrupted run by the skipped steps (further into the
warmup or the decay than the run it continues)."""

from __future__ import annotations

import functools
from types import SimpleNamespace

import pytest
import torch

from training.engine import apply_optimizer_settings, lr_factor


def _engine(steps_taken: int, overflows: set[int], factor) -> SimpleNamespace:  # noqa: ANN001
    """An engine after ``steps_taken`` optimizer steps, stepped as DeepSpeed's _take_model_step does."""
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=0.1)
    engine = SimpleNamespace(optimizer=optimizer, lr_scheduler=torch.optim.lr_scheduler.LambdaLR(optimizer, factor),
                             global_steps=0, skipped_steps=0)
    for step in range(steps_taken):
        if step in overflows:
            engine.skipped_steps += 1  # no optimizer step, no scheduler step
        else:
            engine.lr_scheduler.step()
        engine.global_steps += 1
    return engine


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before:UserWarning")  # no real steps here
@pytest.mark.parametrize("schedule", ["warmup", "cosine"])
def test_a_resume_continues_the_schedule_where_the_uninterrupted_run_is(schedule):
    factor = functools.partial(lr_factor, warmup_steps=8 if schedule == "warmup" else 0, total_steps=20,
                               schedule="constant" if schedule == "warmup" else "cosine", min_ratio=0.1)
    uninterrupted = _engine(6, {1, 4}, factor)
    resumed = _engine(0, set(), factor)  # a fresh engine, then DeepSpeed's load restores the step counts
    resumed.global_steps, resumed.skipped_steps = uninterrupted.global_steps, uninterrupted.skipped_steps
    apply_optimizer_settings(resumed, 0.1, 0.0)
    assert resumed.lr_scheduler.last_epoch == uninterrupted.lr_scheduler.last_epoch == 4
    assert resumed.optimizer.param_groups[0]["lr"] == pytest.approx(uninterrupted.optimizer.param_groups[0]["lr"])
    for engine in (uninterrupted, resumed):  # and both go on alike
        engine.lr_scheduler.step()
    assert resumed.optimizer.param_groups[0]["lr"] == pytest.approx(uninterrupted.optimizer.param_groups[0]["lr"])
