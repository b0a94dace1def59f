"""How much each sample weighs in a GRPO optimizer step (training/grpo.py: valid_per_optimizer_step,
sample_sum_scale; used by training/trainer.py).

The objective is a mean over the step's valid items. The simulation below reduces micro-batch losses the
way DeepSpeed does (each loss divided by gradient_accumulation_steps, gradients averaged over ranks);
`test_deepspeed_reduces_as_assumed` checks that assumption against a real 2-rank ZeRO-2 and ZeRO-3 engine.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from tests.launches import run_to_end, torchrun
from training.grpo import clipped_policy_loss, sample_sum_scale, valid_per_optimizer_step

ROOT = Path(__file__).resolve().parents[1]
G = 5  # group size that no micro_batch in (2, 3) divides: the last micro-batch is short


def test_valid_per_optimizer_step_hand_computed():
    assert valid_per_optimizer_step([1, 0, 2, 2, 1, 0], 3) == [3, 3]
    assert valid_per_optimizer_step([1, 0, 2, 2, 1, 0], 2) == [1, 4, 1]
    assert valid_per_optimizer_step([0, 0], 1) == [0, 0]
    with pytest.raises(ValueError, match="do not split"):
        valid_per_optimizer_step([1, 1, 1], 2)
    with pytest.raises(ValueError, match="micro_per_step"):
        valid_per_optimizer_step([1], 0)
    with pytest.raises(ValueError, match="negative"):
        valid_per_optimizer_step([1, -1], 1)


def test_sample_sum_scale_hand_computed():
    # 3 accumulation steps, 2 ranks, 4 valid samples in the step: 3 * 2 / 4
    assert sample_sum_scale(4, 3, 2) == 1.5
    assert sample_sum_scale(6, 1, 1) == pytest.approx(1 / 6)
    assert sample_sum_scale(0, 3, 2) == 0.0  # nothing valid: every loss of the step is zero anyway
    with pytest.raises(ValueError, match=">= 1"):
        sample_sum_scale(1, 0, 1)
    with pytest.raises(ValueError, match="step_valid"):
        sample_sum_scale(-1, 1, 1)


def _ranks(seed: int = 0) -> list[dict]:
    """Two ranks, each with 2 groups of G samples: features, old log-probs, advantages, valid mask."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for valid_groups in ([[1, 1, 0, 1, 1], [1, 1, 1, 1, 1]], [[0, 1, 1, 0, 1], [1, 0, 0, 1, 1]]):
        x = torch.randn(2, G, 4, generator=gen, dtype=torch.float64)
        out.append({"x": x, "old": torch.randn(2, G, generator=gen, dtype=torch.float64) * 0.1,
                    "adv": torch.randn(2, G, generator=gen, dtype=torch.float64),
                    "valid": torch.tensor(valid_groups, dtype=torch.bool)})
    return out


def _log_prob(theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return x @ theta * 0.1  # a tiny "policy": log-prob linear in the parameters


def _step_gradient(ranks: list[dict], micro_batch: int, *, per_micro_mean: bool = False) -> torch.Tensor:
    """One optimizer step as training/trainer.py runs it (one SDE step, one optimizer step per epoch),
    reduced as DeepSpeed does. `per_micro_mean` is the weighting before the fix (mean per micro-batch)."""
    chunks = math.ceil(G / micro_batch)
    slices = [slice(c * micro_batch, min((c + 1) * micro_batch, G)) for c in range(chunks)]
    grad_accum = 2 * chunks  # 2 groups per rank
    world = len(ranks)
    counts = [valid_per_optimizer_step([int(r["valid"][gi, sl].sum()) for gi in range(2) for sl in slices], grad_accum)
              for r in ranks]
    step_valid = sum(c[0] for c in counts)  # the all_reduce
    total = torch.zeros(4, dtype=torch.float64)
    for r in ranks:
        theta = torch.ones(4, dtype=torch.float64, requires_grad=True)
        for gi in range(2):
            for sl in slices:
                keep = r["valid"][gi, sl].nonzero().flatten()
                if len(keep) == 0:
                    continue  # a zero loss: no gradient
                lp = _log_prob(theta, r["x"][gi, sl])
                pol, _, _ = clipped_policy_loss(lp[keep], r["old"][gi, sl][keep], r["adv"][gi, sl][keep], 0.2)
                loss = pol if per_micro_mean else pol * (len(keep) * sample_sum_scale(step_valid, grad_accum, world))
                (loss / grad_accum).backward()  # DeepSpeed: loss / gradient_accumulation_steps
        total += theta.grad
    return total / world  # DeepSpeed: gradients averaged over ranks


def _mean_over_valid_gradient(ranks: list[dict]) -> torch.Tensor:
    theta = torch.ones(4, dtype=torch.float64, requires_grad=True)
    lp = torch.cat([_log_prob(theta, r["x"])[r["valid"]] for r in ranks])
    old = torch.cat([r["old"][r["valid"]] for r in ranks])
    adv = torch.cat([r["adv"][r["valid"]] for r in ranks])
    clipped_policy_loss(lp, old, adv, 0.2)[0].backward()
    return theta.grad


@pytest.mark.parametrize("micro_batch", [1, 2, 3, G])
def test_every_valid_sample_weighs_the_same_whatever_micro_batch(micro_batch):
    ranks = _ranks()
    want = _mean_over_valid_gradient(ranks)
    assert torch.allclose(_step_gradient(ranks, micro_batch), want, rtol=1e-12, atol=1e-15)


def test_mean_per_micro_batch_did_not():
    """The weighting this replaced: the same data gave a different gradient for each micro_batch."""
    ranks = _ranks()
    want = _mean_over_valid_gradient(ranks)
    for micro_batch in (1, 2, 3):
        got = _step_gradient(ranks, micro_batch, per_micro_mean=True)
        assert not torch.allclose(got, want, rtol=1e-3), micro_batch


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.parametrize(("stage", "dtype"), [(2, "float32"), (3, "float32"), (2, "bfloat16"), (3, "bfloat16")])
def test_deepspeed_reduces_as_assumed(tmp_path, stage, dtype):
    """2 CPU ranks, ZeRO-2 (default) or ZeRO-3 (supported, the Wan recipe's), SGD with lr 1: the parameter change
    of one optimizer step is minus the mean over both ranks' valid samples of their loss gradients
    (tests/ds_weighting_probe.py), with G = 5 in micro-batches of 2 (a short last one). In a bf16 engine (the
    GPU recipes') too: its float32 masters move by that step up to bf16 rounding of the network's gradient,
    well inside what counting the short micro-batch as a full one would change."""
    out = tmp_path / "probe.json"
    run_to_end([*torchrun(), str(ROOT / "tests" / "ds_weighting_probe.py"), str(out), str(stage), dtype],
               timeout=300, what="weighting probe")
    result = json.loads(out.read_text())
    tolerance = 1e-6 if dtype == "float32" else 3e-4  # bf16: ~1% of the step (measured 4e-5)
    assert result["module_dtype"] == f"torch.{dtype}", result
    assert result["max_abs_diff"] < tolerance, result
    assert result["max_abs_delta"] > 1e-3, result  # the step moved the parameters
    assert result["short_as_full_diff"] > 10 * tolerance, result  # a wrong weighting would be caught


