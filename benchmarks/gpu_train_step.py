"""One DynDiff-GRPO iteration of a Cosmos-Predict2.5-2B-shaped transformer on one GPU.

A randomly initialised ``CosmosTransformer3DModel`` with the real 2B configuration
(``policy.cosmos.COSMOS_PREDICT2_5_2B``; no hub access) in bf16; a group of G = 4 rollouts of
10 steps (SDE window [0, 4)) from one conditioning frame and a random 512-token text feature
tensor of the real width (100352); then one update step: for each sample, the recorded SDE step 1
is recomputed with gradients (gradient checkpointing on) under a clipped GRPO loss with random
advantages, gradients accumulate over the 4 samples, and one plain ``torch.optim.AdamW`` step
runs (bf16 parameters and optimizer state; self-contained, no DeepSpeed -- the trainer owns that).

Prints ``name: value`` lines: the latent shape, seconds and peak GPU memory per phase (build,
rollout, update), and the log-ratio of the recomputed vs recorded log-prob before the update
(bf16 kernels differ between the batched rollout and the per-sample recomputation, so it is not
exactly 0; the per-element ``mean`` reduction shows the scale per latent element).

Default size: 93 frames at 480 x 832 (latent [4, 16, 24, 60, 104], 37,440 tokens per sample)
so that the whole run stays well inside 5 minutes on an H200; ``--height 704 --width 1280``
gives the 720p latent [4, 16, 24, 88, 160] (84,480 tokens; attention cost ~5x per forward).
Without CUDA it prints a skip line and exits 0; ``--cpu-dry-run`` runs the same code path on
CPU with the tiny test configuration (a code check, not a measurement).

Diffusers' Cosmos forward resizes its padding mask with torchvision: when torchvision is
missing, the padding-mask channel is appended by the wrapper instead (same parameters and FLOPs).
"""

from __future__ import annotations

import argparse
import time

import torch

from policy.conditioning import Conditioning, make_cond_mask
from policy.cosmos import COSMOS_PREDICT2_5_2B, TINY_COSMOS, build_cosmos_transformer, cosmos_text_dim
from policy.diffusers_model import enable_gradient_checkpointing
from policy.rollout import RolloutConfig, rollout, step_log_prob
from policy.world_model import FlowWorldModel
from training.models import cast_like_from_pretrained


def _torchvision_available() -> bool:
    try:
        import torchvision  # noqa: F401
    except ImportError:
        return False
    return True


def _phase(name: str, t0: float, device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() / 2**30
        print(f"{name}_peak_memory_gib: {peak:.2f}")
        torch.cuda.reset_peak_memory_stats()
    print(f"{name}_seconds: {time.perf_counter() - t0:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=93)
    ap.add_argument("--height", type=int, default=480)
    ap.add_argument("--width", type=int, default=832)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--text-tokens", type=int, default=512)
    ap.add_argument("--cpu-dry-run", action="store_true", help="tiny config on CPU (code check only)")
    args = ap.parse_args()

    if args.cpu_dry_run:
        device, dtype, config = torch.device("cpu"), torch.float32, dict(TINY_COSMOS)
        args.frames, args.height, args.width, args.text_tokens = 9, 32, 32, 8
    elif not torch.cuda.is_available():
        print("gpu_train_step: skipped (no CUDA device)")
        return
    else:
        device, dtype, config = torch.device("cuda"), torch.bfloat16, dict(COSMOS_PREDICT2_5_2B)
        if not _torchvision_available():
            config.update(concat_padding_mask=False, in_channels=config["in_channels"] + 1)
        torch.backends.cuda.matmul.allow_tf32 = True

    g = args.group
    f = (args.frames - 1) // 4 + 1
    h, w = args.height // 8, args.width // 8
    print(f"latent_shape: {[g, 16, f, h, w]}")
    print(f"tokens_per_sample: {f * (h // 2) * (w // 2)}")

    # -- build -----------------------------------------------------------------------------
    t0 = time.perf_counter()
    with device:
        transformer = build_cosmos_transformer(config, seed=0)
    cast_like_from_pretrained(transformer, dtype)  # as the trainer loads it: learnable_pos_embed stays float32
    n_params = sum(p.numel() for p in transformer.parameters())
    print(f"transformer_parameters: {n_params}")
    model = FlowWorldModel("cosmos", transformer, vae=None, text_encoder=None)
    gen = torch.Generator(device=device).manual_seed(0)
    first = torch.randn(1, 16, 1, h, w, generator=gen, device=device)
    text = torch.randn(1, args.text_tokens, cosmos_text_dim(transformer), generator=gen, device=device, dtype=dtype)
    cond = Conditioning(first, text, make_cond_mask(1, f, 1, device=device)).repeat_interleave(g)
    cfg = RolloutConfig(num_steps=args.steps, sde_window=(0, 4))
    _phase("build", t0, device)

    # -- rollout ---------------------------------------------------------------------------
    t0 = time.perf_counter()
    model.eval()
    ro = rollout(model, cond, cfg, generator=gen)
    assert torch.isfinite(ro.latents).all()
    _phase("rollout", t0, device)

    # -- update ------------------------------------------------------------------------------
    t0 = time.perf_counter()
    enable_gradient_checkpointing(transformer)  # the trainer's checked helper (training/run_start.py)
    model.train()
    opt = torch.optim.AdamW(transformer.parameters(), lr=1e-5, weight_decay=0.0)
    advantages = torch.randn(g, generator=torch.Generator().manual_seed(1)).to(device)
    record = ro.steps[1]
    log_ratios, log_ratios_mean = [], []
    for i in range(g):
        sub_cond = cond.select(slice(i, i + 1))
        sub = _slice_record(record, i)
        lp, _, _, _ = step_log_prob(model, sub_cond, sub, cfg)
        log_ratio = lp - sub.log_prob
        log_ratios.append(float(log_ratio.detach()))
        numel = float((sub_cond.cond_mask.sum() * 16 * h * w).item())
        log_ratios_mean.append(float(log_ratio.detach()) / numel)
        ratio = torch.exp(log_ratio.clamp(-20, 20))
        adv = advantages[i : i + 1]
        loss = -torch.minimum(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean() / g
        loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(transformer.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    _phase("update", t0, device)
    print(f"grad_norm: {float(grad_norm):.4g}")
    print(f"max_abs_log_ratio_sum: {max(abs(x) for x in log_ratios):.4g}")
    print(f"max_abs_log_ratio_per_element: {max(abs(x) for x in log_ratios_mean):.3g}")


def _slice_record(record, i: int):
    from dataclasses import replace

    def take(t):
        return None if t is None else t[i : i + 1]

    return replace(record, x_t=take(record.x_t), x_next=take(record.x_next), sigma=take(record.sigma),
                   sigma_next=take(record.sigma_next), prev_x0_hat=take(record.prev_x0_hat),
                   log_prob=take(record.log_prob), mask_mean=take(record.mask_mean),
                   binary_mask=take(record.binary_mask))


if __name__ == "__main__":
    main()
