"""Run by tests/test_grpo_weighting.py under `torchrun --nproc_per_node 2` (arguments: output file, ZeRO stage):
one GRPO optimizer step through a real DeepSpeed ZeRO-2 or ZeRO-3 engine, weighted as training/trainer.py weighs it, with SGD (lr 1) so the parameter
change is minus the reduced gradient. Rank 0 writes how far that is from minus the gradient of the mean over
both ranks' valid samples (computed directly in float64)."""

from __future__ import annotations

import json
import math
import sys

import deepspeed
import torch
import torch.distributed as dist
from deepspeed.runtime.zero import GatheredParameters

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
        return x @ self.w * 0.1


def main(out: str, stage: int) -> None:
    deepspeed.init_distributed(dist_backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    chunks = math.ceil(G / MICRO_BATCH)
    slices = [slice(c * MICRO_BATCH, min((c + 1) * MICRO_BATCH, G)) for c in range(chunks)]
    grad_accum = GROUPS * chunks
    policy = Policy()
    start = policy.w.detach().clone()
    engine, _, _, _ = deepspeed.initialize(
        model=policy, optimizer=torch.optim.SGD(policy.parameters(), lr=1.0),
        config={"train_micro_batch_size_per_gpu": MICRO_BATCH, "gradient_accumulation_steps": grad_accum,
                "zero_optimization": {"stage": stage}, "zero_allow_untested_optimizer": True,
                "steps_per_print": 10**6})
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
    with GatheredParameters([engine.module.w]):  # ZeRO-3 partitions it over the ranks; no-op otherwise
        delta = engine.module.w.detach().double() - start.double()
    w = start.double().requires_grad_(True)
    parts = [rank_data(r) for r in range(world)]
    lp = torch.cat([(p["x"].double() @ w * 0.1)[p["valid"]] for p in parts])
    loss, _, _ = clipped_policy_loss(lp, torch.cat([p["old"].double()[p["valid"]] for p in parts]),
                                     torch.cat([p["adv"].double()[p["valid"]] for p in parts]), 0.2)
    loss.backward()
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"max_abs_diff": float((delta + w.grad).abs().max()),
                       "max_abs_delta": float(delta.abs().max())}, f)
    engine.destroy()
    dist.barrier()
    deepspeed.comm.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
