"""DynDiff's rollout mask (E2 of policy/dyndiff.py, which re-exports `dynamic_mask`; DESIGN.md §5, paper Sec. 4.2).

``R = dX - mean_hw(dX)``, ``D = minmax_hw(||R||_2 over C)``, ``B = 1[D > quantile_hw(D, tau)]``,
``M = r_base + (1 - r_base)(0.5 D + 0.5 B)`` with ``dX`` the change of ``x0_hat`` between denoising steps;
latents are ``[B, C, F, H, W]``, masks ``[B, 1, F, H, W]`` (float32; B bool).

Decisions where the issue was silent:

* The quantile in the mask is taken over the H*W positions of each (sample, frame); there
  ``B = 1[D > q]`` equals ``1[D > D_(floor(tau (n-1)) + 1)]`` exactly (no value of D lies strictly
  between two consecutive order statistics; a ``tau (n-1)`` that is whole up to float rounding, e.g.
  ``0.58 * 50``, counts as whole), so the mask needs a single selection
  (``policy.quantile.kth_smallest_last``; ``quantile_large`` there is the full linear quantile
  without torch.quantile's 16M-element limit).
* The binary part B never carries gradient; the continuous part D does unless the caller
  detaches ``delta_x0`` (``RolloutConfig.mask_grad`` in ``policy/rollout.py``).
* Min-max normalisation with a zero range (a static frame, or the first SDE step) gives ``D = 0``
  there, hence ``B = 0`` (``0 > 0`` is false) and ``M = r_base``.
* Masks are computed in float32 whatever the latent dtype and returned as float32.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from policy.errors import DynDiffInputError
from policy.quantile import kth_smallest_last
from policy.tensor_checks import check_latent, no_grad_needed


def check_tau_r_base(tau: float, r_base: float) -> None:
    """Validate the DynDiff settings: ``tau`` in (0, 1), ``r_base`` in (0, 1]."""
    if not 0.0 < float(tau) < 1.0:
        raise DynDiffInputError(f"tau must be in (0, 1), got {tau}")
    if not 0.0 < float(r_base) <= 1.0:
        raise DynDiffInputError(f"r_base must be in (0, 1], got {r_base}")


def _minmax_hw(d: Tensor, inplace: bool = False) -> Tensor:
    """Min-max normalise [B, 1, F, H, W] over (H, W) per (b, f); a zero range gives 0.

    ``inplace=True`` (no autograd graph) overwrites ``d`` and skips the masked temporaries."""
    flat = d.flatten(-2)
    # two vectorised reductions: torch.aminmax along a dim is ~18x slower than amin + amax on CPU
    lo, hi = flat.amin(dim=-1, keepdim=True), flat.amax(dim=-1, keepdim=True)
    rng = hi - lo
    ok = rng > 0
    if inplace:  # zero range: flat - lo is exactly 0 there, and 0 / 1 = 0
        return flat.sub_(lo).div_(torch.where(ok, rng, 1.0)).view_as(d)
    out = torch.where(ok, (flat - lo) / torch.where(ok, rng, torch.ones_like(rng)), torch.zeros_like(flat))
    return out.view_as(d)


def dynamic_mask(
    delta_x0: Tensor | None,
    tau: float,
    r_base: float,
    *,
    shape: tuple[int, ...] | None = None,
    device: torch.device | str | None = None,
    overwrite: bool = False,
) -> Tensor:
    """(E2) DynDiff rollout mask ``M`` of shape [B, 1, F, H, W] (float32).

    ``R = dX - mean_{h,w}(dX)`` per channel and frame; ``D = minmax_{h,w}(||R||_2 over C)`` per
    frame; ``B = 1[D > quantile_{h,w}(D, tau)]``; ``M = r_base + (1 - r_base)(0.5 D + 0.5 B)``.

    ``delta_x0`` is ``x0_hat(k) - x0_hat(k-1)`` [B, C, F, H, W] with ``k`` the *denoising step*, frame by
    frame (the paper's ``Delta x0_hat^(k)`` could also read as a difference between video frames; DESIGN.md §5
    fixes the step reading, whose first SDE step has no ``k-1``: D = B = 0). Its sign is irrelevant (only
    ``||R||_2`` enters). ``None`` marks the first SDE step (no previous prediction): ``D = B = 0`` so
    ``M = r_base`` everywhere, with the [B, C, F, H, W] (or [B, 1, F, H, W]) ``shape`` given explicitly.
    Gradients flow through ``D`` (``B`` is a step function and carries none); detach ``delta_x0`` for a
    fixed mask. ``overwrite=True`` allows reusing ``delta_x0``'s storage as scratch space when no autograd
    graph is built (callers passing a temporary save a full-size allocation).
    """
    check_tau_r_base(tau, r_base)
    if delta_x0 is None:
        if shape is None or len(shape) != 5:
            raise DynDiffInputError("dynamic_mask(None, ...) needs shape=(B, C, F, H, W) for the first SDE step")
        b, _, f, h, w = shape
        return torch.full((b, 1, f, h, w), float(r_base), dtype=torch.float32, device=device)
    return dynamic_mask_parts(delta_x0, tau, r_base, overwrite=overwrite)[0]


def _quantile_floor(tau: float, n: int) -> int:
    """``floor(tau (n - 1))``, the order statistic below the tau-quantile of n values, where a product that is
    whole up to float rounding counts as whole: ``0.58 * 50`` is ``28.999999999999996`` in floats, and its floor
    28 would put order statistic 29 -- the quantile itself -- into ``B = 1[D > q]``."""
    pos = float(tau) * (n - 1)
    whole = round(pos)
    return int(whole) if abs(pos - whole) <= 1e-12 * max(1.0, pos) else int(math.floor(pos))


def dynamic_mask_parts(
    delta_x0: Tensor,
    tau: float,
    r_base: float,
    *,
    overwrite: bool = False,
    binary: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """(E2) ``(M, B)``: the mask of :func:`dynamic_mask` and its binary part ``B = 1[D > quantile_hw(D, tau)]``
    (bool [B, 1, F, H, W]) for a ``delta_x0`` that is not None.

    ``binary`` (bool [B, 1, F, H, W]), when given, replaces this ``D``'s own ``B`` inside ``M``:
    ``M = r_base + (1 - r_base)(0.5 D + 0.5 binary)`` (a rollout's ``B`` reused with the current ``D``:
    ``policy.rollout``'s ``ratio_mask = "rollout"``); the returned ``B`` is still this ``D``'s own.
    """
    check_tau_r_base(tau, r_base)
    check_latent("delta_x0", delta_x0)
    if binary is not None:
        b, _, f, h, w = delta_x0.shape
        if tuple(binary.shape) != (b, 1, f, h, w):
            raise DynDiffInputError(f"binary must be [B, 1, F, H, W] = {(b, 1, f, h, w)}, got {tuple(binary.shape)}")
    dx = delta_x0.float()
    inplace = no_grad_needed(delta_x0)
    mean_hw = dx.mean(dim=(-2, -1), keepdim=True)
    if inplace and (overwrite or dx.data_ptr() != delta_x0.data_ptr()):
        resid = dx.sub_(mean_hw)  # dx is scratch: a float32 copy, or a temporary the caller gave up
    else:
        resid = dx - mean_hw
    # L2 over channels; squaring then summing is several times faster than linalg.vector_norm on
    # a strided channel reduction (in place when no graph is built). The clamp keeps the sqrt
    # gradient finite at 0.
    sq = resid.square_() if inplace else resid * resid
    norm = sq.sum(dim=1, keepdim=True)  # [B, 1, F, H, W]
    norm = norm.clamp_min_(1e-30).sqrt_() if inplace else norm.clamp_min(1e-30).sqrt()
    d = _minmax_hw(norm, inplace)
    b, _, f, h, w = d.shape
    # B = 1[D > q] with q the linearly interpolated tau-quantile over H*W. q lies between the
    # order statistics lo = D_(floor(p)) and hi = D_(floor(p)+1), p = tau (n - 1), and no value of
    # D lies strictly between them, so D > q <=> D > lo exactly (ties included): one selection.
    n = h * w
    k = _quantile_floor(tau, n) + 1
    thr = kth_smallest_last(d.detach().reshape(b, f, n), k).view(b, 1, f, 1, 1)
    bin_mask = d.detach() > thr
    used = bin_mask if binary is None else binary.to(device=d.device, dtype=torch.bool)
    half = 0.5 * (1.0 - r_base)
    # M = (half D + r_base) + half B on both paths, in that order: the rollout (in place, no graph) and the
    # update's recomputation with autograd (mask_grad "differentiable") must round identically, or the ratio
    # at the rollout's parameters is off 1 by rounding (tests/test_dyndiff_first_ratio.py)
    if inplace:  # written into D's buffer (fused: no temporaries)
        return d.mul_(half).add_(r_base).add_(used, alpha=half), bin_mask
    return torch.add(d * half + r_base, used.to(d.dtype), alpha=half), bin_mask
