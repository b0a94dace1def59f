"""training/update.py's `update_policy` through a real (single-rank, CPU) DeepSpeed engine with torch AdamW and
weight decay: an optimizer step whose micro-batches hold no valid sample must leave the weights alone. Before
the fix such a step ran with a zero gradient, and AdamW still moved the weights (weight decay, and the momentum
of earlier steps), so the same data gave other weights when ``optimizer_steps_per_epoch`` split it differently.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tests.test_update_phase import G, _cfg, _groups, one_rank_group  # noqa: F401 (the fixture)
from training.update import update_policy

pytestmark = pytest.mark.slow


class Policy(torch.nn.Module):
    """PolicyStep's interface: forward(cond, record, rcfg) -> (log_prob, mean, std, flips); float32 weights
    (DeepSpeed does not reduce float64 gradients)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(0.5, 1.5, 4))
        self.world_model = None

    def forward(self, cond, record, rcfg):  # noqa: ANN001, ANN201 (engine call)
        lp = record.x.float() @ self.w * 0.1
        return lp, lp[:, None], torch.ones_like(lp)[:, None], torch.zeros_like(lp)


def _weights_after(valid_rows: list[list[int]], grad_accum: int) -> tuple[torch.Tensor, int]:
    import deepspeed

    policy = Policy()
    engine, _, _, _ = deepspeed.initialize(model=policy, model_parameters=list(policy.parameters()), config={
        "train_micro_batch_size_per_gpu": G, "gradient_accumulation_steps": grad_accum, "steps_per_print": 10**6,
        "optimizer": {"type": "AdamW", "params": {"lr": 0.1, "weight_decay": 0.5, "torch_adam": True}},
        "zero_optimization": {"stage": 0}})
    groups = _groups(valid_rows, sde_steps=1)  # seeded: group 0 is the same data in both runs
    cfg = dataclasses.replace(_cfg(G, 1), optimizer_steps_per_epoch=len(valid_rows) // grad_accum)
    update_policy(engine, groups, cfg, rcfg=None, reference=None, iteration=0, grad_accum=grad_accum,
                  device=torch.device("cpu"))
    out = engine.module.w.detach().clone(), int(engine.global_steps)
    engine.destroy()
    return out


def test_an_empty_optimizer_step_leaves_adamw_weights_alone(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "0")  # DeepSpeed reads it; torchrun would set it
    alone, steps_alone = _weights_after([[1, 1, 0, 1, 1]], grad_accum=1)
    with_empty, steps = _weights_after([[1, 1, 0, 1, 1], [0] * G], grad_accum=1)  # 2 steps, one empty
    assert steps_alone == 1 and steps == 1
    assert torch.equal(with_empty, alone)
    assert not torch.equal(alone, torch.linspace(0.5, 1.5, 4))  # the real step did move the weights
