"""Run by tests/test_grpo_weighting.py under `torchrun --nproc_per_node 2` (arguments: output file, ZeRO stage,
dtype float32 | bfloat16): one GRPO optimizer step through a real DeepSpeed ZeRO-2 or ZeRO-3 engine, weighted as
training/update.py weighs it, with SGD (lr 1) so the change of the float32 master parameters is minus the reduced
gradient. G = 5 samples in micro-batches of 2: the last one of each group is short. Rank 0 writes how far that
is from minus the gradient of the mean over both ranks' valid samples (computed directly in float64, at the
parameters the engine starts from: rounded to bf16 in a bf16 engine), and how far a weighting that counts the
short micro-batch as a full one would be (``short_as_full_diff``: what the tolerance must tell apart).

In bf16 the network runs in bf16 and the log-prob is taken in float64 from its output, as in the trainer
(policy/dyndiff.py ``gaussian_log_prob``)."""

from __future__ import annotations

import json
import math
import sys

import deepspeed
import torch
import torch.distributed as dist
from deepspeed.utils import safe_get_full_fp32_param

from training.grpo import clipped_policy_loss, sample_sum_scale, valid_per_optimizer_step

G, MICRO_BATCH, GROUPS = 5, 2, 2
VALID = ([[1, 1, 0, 1, 1], [1, 1, 1, 1, 1]], [[0, 1, 1, 0, 1], [1, 0, 0, 1, 1]])  # per rank, per group


def rank_data(rank: int) -> dict:
    gen = torch.Generator().manual_seed(100 + rank)
    return {"x": torch.randn(GROUPS, G, 4, generator=gen), "old": torch.randn(GROUPS, G, generator=gen) * 0.1,
            "adv": torch.randn(GROUPS, G, generator=gen), "valid": torch.tensor(VALID[rank], dtype=torch.bool)}


class Policy(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(0.5, 1.5, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x.to(self.w.dtype) @ self.w).double() * 0.1  # bf16 network, float64 log-prob


def exact_step(parts: list[dict], w: torch.Tensor, short_as_full: bool = False) -> torch.Tensor:
    """Minus the float64 gradient of the objective at ``w``: the mean over all valid samples; ``short_as_full``
    weighs each micro-batch's mean by MICRO_BATCH instead of its valid samples (a short one counted full)."""
    w = w.double().requires_grad_(True)
    if not short_as_full:
        lp = torch.cat([(p["x"].double() @ w * 0.1)[p["valid"]] for p in parts])
        loss, _, _ = clipped_policy_loss(lp, torch.cat([p["old"].double()[p["valid"]] for p in parts]),
                                         torch.cat([p["adv"].double()[p["valid"]] for p in parts]), 0.2)
    else:
        terms = []
        for p in parts:
            for gi in range(GROUPS):
                for c in range(math.ceil(G / MICRO_BATCH)):
                    sl = slice(c * MICRO_BATCH, min((c + 1) * MICRO_BATCH, G))
                    keep = p["valid"][gi, sl]
                    if keep.any():
                        pol, _, _ = clipped_policy_loss((p["x"][gi, sl].double() @ w * 0.1)[keep],
                                                        p["old"][gi, sl].double()[keep],
                                                        p["adv"][gi, sl].double()[keep], 0.2)
                        terms.append(pol * MICRO_BATCH)
        loss = sum(terms) / sum(int(p["valid"].sum()) for p in parts)
    loss.backward()
    return -w.grad


def main(out: str, stage: int, dtype: str) -> None:
    deepspeed.init_distributed(dist_backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    chunks = math.ceil(G / MICRO_BATCH)
    slices = [slice(c * MICRO_BATCH, min((c + 1) * MICRO_BATCH, G)) for c in range(chunks)]
    grad_accum = GROUPS * chunks
    policy = Policy()
    if dtype == "bfloat16":  # the engine keeps float32 masters of the bf16-cast parameters
        policy.w.data = policy.w.data.to(torch.bfloat16).float()
    start = policy.w.detach().clone()
    engine, _, _, _ = deepspeed.initialize(
        model=policy, optimizer=torch.optim.SGD(policy.parameters(), lr=1.0),
        config={"train_micro_batch_size_per_gpu": MICRO_BATCH, "gradient_accumulation_steps": grad_accum,
                "zero_optimization": {"stage": stage}, "zero_allow_untested_optimizer": True,
                "steps_per_print": 10**6, **({"bf16": {"enabled": True}} if dtype == "bfloat16" else {})})
    data = rank_data(rank)
    counts = torch.tensor(valid_per_optimizer_step(
        [int(data["valid"][gi, sl].sum()) for gi in range(GROUPS) for sl in slices], grad_accum), dtype=torch.float64)
    dist.all_reduce(counts)
    for gi in range(GROUPS):
        for sl in slices:
            keep = data["valid"][gi, sl].nonzero().flatten()
            lp = engine(data["x"][gi, sl])
            if len(keep) == 0:
                loss = lp.sum() * 0.0
            else:
                pol, _, _ = clipped_policy_loss(lp[keep], data["old"][gi, sl][keep], data["adv"][gi, sl][keep], 0.2)
                loss = pol * (len(keep) * sample_sum_scale(int(counts[0]), grad_accum, world))
            engine.backward(loss)
            engine.step()
    # the float32 masters (gathered under ZeRO-3; in a bf16 engine the module holds their bf16 copies)
    delta = safe_get_full_fp32_param(engine.module.w).detach().double() - start.double()
    parts = [rank_data(r) for r in range(world)]
    want = exact_step(parts, start)
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"max_abs_diff": float((delta - want).abs().max()),
                       "max_abs_delta": float(delta.abs().max()), "module_dtype": str(engine.module.w.dtype),
                       "short_as_full_diff": float((exact_step(parts, start, True) - want).abs().max())}, f)
    engine.destroy()
    dist.barrier()
    deepspeed.comm.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "float32")
