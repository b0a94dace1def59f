"""Cost of one DynDiff transition (mask + hybrid step + log-prob) relative to a plain CPS step.

Prints ``name: value`` lines:

* ``dyndiff_over_cps_step``: best-of-N time of [predict_x0 + dynamic_mask + hybrid_step +
  gaussian_log_prob] (what ``policy/rollout.py`` runs per SDE step) over the best-of-N time of a
  plain coefficient-preserving step with one scalar noise std written as the CPS / Flow-GRPO
  reference samplers write it (:func:`cps_step`), both on the same latent [1, 16, 24, 44, 80] and
  the same velocity (the network call is excluded from both: it is identical). Target <= 1.5.
  ``dyndiff_over_fused_cps_step`` (a diagnostic, no target) compares with a hand-fused CPS step
  (:func:`cps_step_fused`) instead: the mask's own cost (x0 change, mean removal, channel norm,
  per-frame selection) is then laid bare. Single-threaded by
  default (``--threads``) because a shared machine makes multi-threaded timings erratic; best-of-N
  because load only ever adds time. ``dyndiff_over_cps_step_median_paired`` is the median of the
  per-repeat ratios (same pairs), for comparison.
* ``large_latent_elements`` / ``large_latent_seconds``: one full DynDiff transition on a latent of
  more than 16M elements (where ``torch.quantile`` refuses its input).

Allocator: on CPU every fresh 5 MB tensor can come from a new mmap and page-fault on first touch,
which adds large, erratic costs to both sides (a GPU's caching allocator has no such cost). The
script therefore re-executes itself once with glibc's malloc told to keep freed memory
(``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` / ``MALLOC_TOP_PAD_``) unless
``--system-malloc`` is given; ``stable_malloc`` in the output says which ran.

Usage: ``python benchmarks/dyndiff_step.py [--repeats N] [--device cpu|cuda] [--system-malloc]``.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

import torch

from policy.dyndiff import dynamic_mask, gaussian_log_prob, hybrid_step, predict_x0, predict_x0_eps


def cps_step(x_t, v, sigma: float, sigma_next: float, eta: float, noise):
    """Plain CPS transition with one scalar noise std ``sigma_next * eta``, written the way the
    CPS / Flow-GRPO reference samplers write it: x0 and eps predictions, the coefficient-preserving
    mean, the sample, and the summed element-wise Gaussian log-density of the sample."""
    x0 = x_t - sigma * v
    eps = x_t + (1.0 - sigma) * v
    std = sigma_next * eta
    mean = x0 * (1.0 - sigma_next) + eps * math.sqrt(sigma_next**2 - std**2)
    sample = mean + std * noise
    lp = -((sample - mean) ** 2) / (2 * std**2) - math.log(std) - 0.5 * math.log(2 * math.pi)
    return sample, lp.flatten(1).sum(1)


def cps_step_fused(x_t, v, sigma: float, sigma_next: float, eta: float, noise):
    """The same CPS transition written as tightly as a scalar std allows (fused multiply-adds, the
    log-density's constant terms folded, the quadratic term as one norm): a lower bound."""
    x0, eps = predict_x0_eps(x_t, v, sigma)
    sn = sigma_next * eta
    mean = torch.add(x0 * (1.0 - sigma_next), eps, alpha=math.sqrt(sigma_next**2 - sn**2))
    sample = torch.add(mean, noise, alpha=sn)
    resid = (sample - mean).flatten(1)
    n = resid.shape[1]
    lp = -0.5 * torch.linalg.vector_norm(resid, dim=1).square() / (sn * sn) - n * (
        math.log(sn) + 0.5 * math.log(2 * math.pi)
    )
    return sample, lp


def dyndiff_step(x_t, v, prev_x0, sigma: float, sigma_next: float, cond_mask, noise):
    """Full DynDiff transition: mask from the x0_hat change, hybrid step, log-prob of the sample."""
    x0 = predict_x0(x_t, v, sigma)
    mask = dynamic_mask(x0 - prev_x0, tau=0.8, r_base=0.3, overwrite=True)  # as policy/rollout.py does
    step = hybrid_step(x_t, v, sigma, sigma_next, mask, noise=noise, cond_mask=cond_mask)
    lp = gaussian_log_prob(step.sample, step.mean, step.std, weight_mask=cond_mask)
    return step.sample, lp


def _time_pair(fn_a, fn_b, repeats: int, sync) -> tuple[list[float], list[float]]:
    """Seconds of each repeat of two functions timed back to back (paired: both see the same load)."""
    fn_a(), fn_b()
    sync()
    ta, tb = [], []
    for _ in range(repeats):
        for fn, acc in ((fn_a, ta), (fn_b, tb)):
            t0 = time.perf_counter()
            fn()
            sync()
            acc.append(time.perf_counter() - t0)
    return ta, tb


_STABLE_MALLOC = {
    "MALLOC_MMAP_THRESHOLD_": str(32 * 2**20),
    "MALLOC_TRIM_THRESHOLD_": str(4 * 2**30),
    "MALLOC_TOP_PAD_": str(256 * 2**20),
}


def main() -> None:
    if "--system-malloc" not in sys.argv and any(os.environ.get(k) != v for k, v in _STABLE_MALLOC.items()):
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **_STABLE_MALLOC})
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--skip-large", action="store_true")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (1 = stable on shared machines)")
    ap.add_argument("--system-malloc", action="store_true", help="do not re-exec with the stable malloc settings")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    g = torch.Generator(device="cpu").manual_seed(0)
    shape = (1, 16, 24, 44, 80)
    x_t, v, prev_x0, noise = (torch.randn(shape, generator=g).to(dev) for _ in range(4))
    cond_mask = torch.ones(shape[0], 1, shape[2], 1, 1, device=dev)
    cond_mask[:, :, 0] = 0
    with torch.no_grad():
        t_cps, t_dyn = _time_pair(
            lambda: cps_step(x_t, v, 0.7, 0.6, 0.5, noise),
            lambda: dyndiff_step(x_t, v, prev_x0, 0.7, 0.6, cond_mask, noise),
            args.repeats,
            sync,
        )
        t_fused, t_dyn2 = _time_pair(
            lambda: cps_step_fused(x_t, v, 0.7, 0.6, 0.5, noise),
            lambda: dyndiff_step(x_t, v, prev_x0, 0.7, 0.6, cond_mask, noise),
            args.repeats,
            sync,
        )
    print(f"latent_shape: {list(shape)}")
    print(f"torch_threads: {torch.get_num_threads()}")
    print(f"stable_malloc: {not args.system_malloc}")
    print(f"cps_step_seconds: {min(t_cps):.5f}")
    print(f"dyndiff_step_seconds: {min(t_dyn):.5f}")
    print(f"dyndiff_over_cps_step: {min(t_dyn) / min(t_cps):.3f}")
    ratios = [b / a for a, b in zip(t_cps, t_dyn, strict=True)]
    print(f"dyndiff_over_cps_step_median_paired: {statistics.median(ratios):.3f}")
    print(f"cps_step_fused_seconds: {min(t_fused):.5f}")
    print(f"dyndiff_over_fused_cps_step: {min(t_dyn2) / min(t_fused):.3f}")
    if args.skip_large:
        return
    big = (4, 16, 24, 88, 160)  # 21.6M elements > 2**24
    del x_t, v, prev_x0, noise
    x_t, v, prev_x0, noise = (torch.randn(big, generator=g).to(dev) for _ in range(4))
    cond_mask = torch.ones(big[0], 1, big[2], 1, 1, device=dev)
    cond_mask[:, :, 0] = 0
    with torch.no_grad():
        t0 = time.perf_counter()
        _, lp = dyndiff_step(x_t, v, prev_x0, 0.7, 0.6, cond_mask, noise)
        sync()
        dt = time.perf_counter() - t0
    assert torch.isfinite(lp).all()
    print(f"large_latent_elements: {x_t.numel()}")
    print(f"large_latent_seconds: {dt:.3f}")


if __name__ == "__main__":
    main()
