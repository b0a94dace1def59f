"""DynDiff sampler maths: pure tensor functions (DESIGN.md §5, paper Sec. 4.2).

Conventions: latents are ``[B, C, F, H, W]``; sigma runs from 1 (noise) to 0 (data);
``x_t = (1 - s) x0 + s eps`` and the velocity is ``v = eps - x0`` (rectified flow).

Equations implemented here (labels E1-E4 used in the docstrings below):

* (E1) ``x0_hat = x_t - s v``, ``eps_hat = x_t + (1 - s) v``                       -> :func:`predict_x0_eps`
* (E2) ``R = dX - mean_hw(dX)``, ``D = minmax_hw(||R||_2 over C)``,
  ``B = 1[D > quantile_hw(D, tau)]``, ``M = r_base + (1 - r_base)(0.5 D + 0.5 B)``  -> :func:`dynamic_mask`
  (policy/dyndiff_mask.py; ``dynamic_mask`` is re-exported here, DESIGN.md §5's name. Its
  ``dynamic_mask_parts`` also returns B, and can take B from elsewhere)
* (E3) ``sn = s_next M``, ``mean = x0_hat (1 - s_next) + eps_hat sqrt(s_next^2 - sn^2)``,
  ``x_next = mean + sn z``                                                          -> :func:`hybrid_step`
* (E4) ``log p = sum [-(x - mean)^2 / (2 sn^2) - log sn - 0.5 log 2 pi]``            -> :func:`gaussian_log_prob`

Decisions where the issue was silent:

* In-place arithmetic only without an autograd graph (rollouts): the same functions serve the no-grad
  rollout and the differentiable recomputation, bit for bit: both paths run the same operations in the same
  order, so the ratio at the rollout's parameters is exactly 1 (tests/test_dyndiff_first_ratio.py).
* ``hybrid_step`` returns ``std`` with the full latent shape as a broadcast (stride-0 over C) view
  of the per-position field ``sigma_next * M``: it costs no memory and log-likelihood sums over
  every latent element, channels included.
* On conditioning frames (``cond_mask == 0``) the sample and the mean both equal ``x_t`` and
  the std is 0, so :func:`gaussian_log_prob` skips them (std-0 elements are always excluded,
  never turned into ``inf``).
* :func:`gaussian_log_prob` reduces and returns in float64 (element-wise terms stay float32). A
  summed log-prob of a real latent (16x24x88x160, ~5.4M elements) is ~-3e6, where float32's spacing
  is 0.25 nats, so a ratio exp(lp - old) could only take the values 1, 1.28, 0.78, ...; a float32
  reduction over millions of elements was also off by hundreds of nats.
* ``mask`` values must lie in [0, 1] (0 gives the deterministic Euler step; 1 the full
  stochastic step); :func:`dynamic_mask` always returns values in [r_base, 1].
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from policy.dyndiff_mask import dynamic_mask
from policy.errors import DynDiffInputError
from policy.masks import check_binary_mask
from policy.quantile import quantile_large
from policy.tensor_checks import check_latent, no_grad_needed

__all__ = [
    "DynDiffInputError", "HybridStep", "dynamic_mask", "gaussian_log_prob", "hybrid_step", "predict_x0", "predict_x0_eps", "quantile_large", "transition_mean_std",
]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


@dataclass(frozen=True)
class HybridStep:
    """One hybrid ODE/SDE transition: the drawn ``sample``, its Gaussian ``mean`` and ``std``."""

    sample: Tensor
    mean: Tensor
    std: Tensor


def _as_batch_sigma(name: str, sigma: Tensor | float, batch: int, ref: Tensor) -> Tensor:
    """Return ``sigma`` as a float32 tensor [B, 1, 1, 1, 1] on ``ref``'s device (scalar or [B])."""
    s = torch.as_tensor(sigma, dtype=torch.float32, device=ref.device)
    if s.ndim == 0:
        s = s.expand(batch)
    if s.ndim != 1 or s.shape[0] != batch:
        raise DynDiffInputError(f"{name} must be a scalar or a [B={batch}] tensor, got shape {tuple(s.shape)}")
    return s.view(batch, 1, 1, 1, 1)


def _check_velocity(x_t: Tensor, v: Tensor) -> None:
    """DynDiffInputError unless ``x_t`` is a latent [B, C, F, H, W] and ``v`` has its shape."""
    check_latent("x_t", x_t)
    if v.shape != x_t.shape:
        raise DynDiffInputError(f"v shape {tuple(v.shape)} must equal x_t shape {tuple(x_t.shape)}")


def _checked_sigma(x_t: Tensor, v: Tensor, sigma: Tensor | float) -> Tensor:
    """``sigma`` as [B, 1, 1, 1, 1] in ``x_t``'s dtype, once ``x_t`` and ``v`` are checked (`_check_velocity`)."""
    _check_velocity(x_t, v)
    return _as_batch_sigma("sigma", sigma, x_t.shape[0], x_t).to(x_t.dtype)


def _x0_hat(x_t: Tensor, v: Tensor, s: Tensor) -> Tensor:
    """(E1) ``x0_hat = x_t - s v`` for a checked ``s`` (`_checked_sigma`)."""
    return torch.addcmul(x_t, s, v, value=-1.0)


def predict_x0_eps(x_t: Tensor, v: Tensor, sigma: Tensor | float) -> tuple[Tensor, Tensor]:
    """(E1) Clean-sample and noise predictions from the velocity.

    ``x0_hat = x_t - s v`` and ``eps_hat = x_t + (1 - s) v`` (paper Sec. 4.2, first equation),
    exact inverses of ``x_t = (1 - s) x0 + s eps`` with ``v = eps - x0``.
    ``sigma`` is a scalar or a [B] tensor.
    """
    s = _checked_sigma(x_t, v, sigma)
    return _x0_hat(x_t, v, s), torch.addcmul(x_t, 1.0 - s, v)


def predict_x0(x_t: Tensor, v: Tensor, sigma: Tensor | float) -> Tensor:
    """(E1) ``x0_hat = x_t - s v`` alone (one pass; what the mask and the rollout record need)."""
    return _x0_hat(x_t, v, _checked_sigma(x_t, v, sigma))


def transition_mean_std(
    x_t: Tensor,
    v: Tensor,
    sigma: Tensor | float,
    sigma_next: Tensor | float,
    mask: Tensor,
    *,
    cond_mask: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """(E3) Gaussian of the hybrid transition: ``mean`` and ``std = s_next * M`` (full latent shape).

    ``mean = x0_hat (1 - s_next) + eps_hat sqrt(s_next^2 - sn^2)`` with ``sn = s_next M``.
    Conditioning frames (``cond_mask == 0``) get ``mean = x_t`` and ``std = 0``.
    Validates shapes, ``0 <= sigma_next < sigma <= 1`` and ``0 <= mask <= 1``.
    """
    _check_velocity(x_t, v)
    b, c, f, h, w = x_t.shape
    s = _as_batch_sigma("sigma", sigma, b, x_t)
    s_next = _as_batch_sigma("sigma_next", sigma_next, b, x_t)
    if bool(((s_next >= s) | (s_next < 0) | (s > 1)).any()):
        raise DynDiffInputError(
            f"need 0 <= sigma_next < sigma <= 1, got sigma={s.flatten().tolist()} "
            f"sigma_next={s_next.flatten().tolist()}"
        )
    if mask.ndim != 5 or mask.shape[1] != 1 or mask.shape[0] != b or tuple(mask.shape[2:]) != (f, h, w):
        raise DynDiffInputError(f"mask must be [B, 1, F, H, W] = {(b, 1, f, h, w)}, got {tuple(mask.shape)}")
    m = mask.float()
    m_lo, m_hi = torch.aminmax(m.detach())
    if bool(m_lo < 0) or bool(m_hi > 1):
        raise DynDiffInputError("mask values must lie in [0, 1]")
    noise_std = s_next * m  # [B, 1, F, H, W]
    gap = s_next * s_next - noise_std * noise_std
    if no_grad_needed(m):
        coef = gap.clamp_min_(0.0).sqrt_()
    else:  # sqrt has an infinite slope at 0 (mask 1): keep gradients finite there
        pos = gap > 0
        coef = torch.where(pos, torch.sqrt(torch.where(pos, gap, torch.ones_like(gap))), torch.zeros_like(gap))
    # mean = x0_hat (1 - s_next) + eps_hat coef with x0_hat = x - s v, eps_hat = x + (1 - s) v
    #      = a x + b v,  a = 1 - s_next + coef,  b = coef (1 - s) - s (1 - s_next)
    # (per-position coefficient fields: two full-size passes instead of six).
    a = 1.0 - s_next + coef
    bv = coef * (1.0 - s) - s * (1.0 - s_next)
    if cond_mask is not None:
        keep = _check_cond_mask(cond_mask, x_t).float()
        a = keep * a + (1.0 - keep)  # conditioning frames: mean = x_t exactly
        bv = keep * bv
        noise_std = noise_std * keep
    if no_grad_needed(x_t, v, a, bv):
        mean = torch.mul(x_t.float(), a).addcmul_(bv, v.float())
    else:
        mean = torch.addcmul(a * x_t.float(), bv, v.float())
    return mean, noise_std.expand(b, c, f, h, w)


def _check_cond_mask(cond_mask: Tensor, x_t: Tensor) -> Tensor:
    b, _, f, h, w = x_t.shape
    ok = (
        cond_mask.ndim == 5
        and cond_mask.shape[0] == b
        and cond_mask.shape[1] == 1
        and cond_mask.shape[2] == f
        and tuple(cond_mask.shape[3:]) in ((1, 1), (h, w))
    )
    if not ok:
        raise DynDiffInputError(
            f"cond_mask must be [B, 1, F, 1, 1] or [B, 1, F, H, W] for latent {tuple(x_t.shape)}, "
            f"got {tuple(cond_mask.shape)}"
        )
    check_binary_mask("cond_mask", cond_mask)  # policy/masks.py: 0/1, never a blend
    return cond_mask


def hybrid_step(
    x_t: Tensor,
    v: Tensor,
    sigma: Tensor | float,
    sigma_next: Tensor | float,
    mask: Tensor,
    noise: Tensor | None = None,
    generator: torch.Generator | None = None,
    *,
    cond_mask: Tensor | None = None,
) -> HybridStep:
    """(E3) One hybrid ODE/SDE step ``x_next = mean + (s_next M) z``, ``z ~ N(0, I)``.

    ``mask`` is [B, 1, F, H, W] in [0, 1]: 0 recovers the deterministic flow Euler step
    ``x + (s_next - s) v``, 1 the full stochastic step whose mean drops the ``eps_hat`` term.
    ``noise`` (same shape as ``x_t``) overrides the draw from ``generator``. Conditioning frames
    (``cond_mask == 0``; [B, 1, F, 1, 1] or [B, 1, F, H, W]) keep ``x_t`` exactly and get std 0.
    Computation is float32; ``sample`` is returned in ``x_t``'s dtype.
    """
    mean, std = transition_mean_std(x_t, v, sigma, sigma_next, mask, cond_mask=cond_mask)
    if noise is None:
        gen_device = generator.device if generator is not None else x_t.device
        noise = torch.randn(x_t.shape, generator=generator, device=gen_device, dtype=torch.float32).to(x_t.device)
    elif noise.shape != x_t.shape:
        raise DynDiffInputError(f"noise shape {tuple(noise.shape)} must equal x_t shape {tuple(x_t.shape)}")
    # std is 0 on conditioning frames and the mean equals x_t there, so the sample keeps x_t exactly.
    sample = torch.addcmul(mean, std, noise.float())
    return HybridStep(sample=sample.to(x_t.dtype), mean=mean, std=std)


def gaussian_log_prob(
    x: Tensor,
    mean: Tensor,
    std: Tensor,
    reduce: Literal["sum", "mean"] = "sum",
    *,
    weight_mask: Tensor | None = None,
) -> Tensor:
    """(E4) Per-sample Gaussian transition log-likelihood [B], float64.

    ``log p = sum_j [-(x_j - mean_j)^2 / (2 std_j^2) - log std_j - 0.5 log 2 pi]`` over latent
    elements ``j`` (paper Sec. 4.2, element-wise log density summed over coordinates).
    Elements with ``std == 0`` (deterministic / conditioning) or ``weight_mask == 0`` are
    excluded (no ``inf``, no NaN gradients); ``weight_mask`` holds 0 or 1 only. ``reduce="mean"`` divides by the number of included
    elements per sample (0 when none). ``std`` and ``weight_mask`` broadcast to ``x``.
    """
    if reduce not in ("sum", "mean"):
        raise DynDiffInputError(f"reduce must be 'sum' or 'mean', got {reduce!r}")
    if x.ndim < 1 or mean.shape != x.shape:
        raise DynDiffInputError(f"mean shape {tuple(mean.shape)} must equal x shape {tuple(x.shape)}")
    field = _compact(std).float()
    if field.ndim != x.ndim:
        raise DynDiffInputError(f"std must have x's number of dims {x.ndim} (broadcastable), got {tuple(std.shape)}")
    valid = field > 0
    if weight_mask is not None:
        if weight_mask.ndim != x.ndim:
            raise DynDiffInputError(f"weight_mask must have {x.ndim} dims (broadcastable), got {tuple(weight_mask.shape)}")
        valid = valid & (_compact(weight_mask).to(x.device) != 0)
        check_binary_mask("weight_mask", _compact(weight_mask))  # policy/masks.py
    try:
        field_shape = torch.broadcast_shapes(field.shape, valid.shape)
        if torch.broadcast_shapes(field_shape, x.shape) != x.shape:
            raise RuntimeError("std / weight_mask are larger than x")
    except RuntimeError as exc:
        raise DynDiffInputError(f"std / weight_mask do not broadcast to x shape {tuple(x.shape)}: {exc}") from exc
    field = field.expand(field_shape)
    valid = valid.expand(field_shape)
    # Everything that depends only on std is computed on the (small) broadcast field; the
    # multiplicity of each field element in x (e.g. C when std is shared over channels)
    # scales its log-scale term and its element count.
    mult = math.prod(x.shape[1:]) // max(1, math.prod(field_shape[1:]))
    safe = torch.where(valid, field, 1.0)
    valid_f = valid.to(safe.dtype)
    inv_std = valid_f / safe
    # the log-scale field is small (no channel dim): float64 costs nothing there
    log_term = (-torch.log(safe.double()) - _LOG_SQRT_2PI) * valid_f.double()
    z = x.float() - mean.float()
    z = z.mul_(inv_std) if no_grad_needed(x, mean, inv_std) else z * inv_std
    # float64 accumulation (z itself stays float32): see the module docstring
    quad = torch.linalg.vector_norm(z.flatten(1), ord=2, dim=1, dtype=torch.float64).square()
    total = -0.5 * quad + mult * log_term.flatten(1).sum(dim=1, dtype=torch.float64)
    if reduce == "sum":
        return total
    count = (mult * valid.flatten(1).sum(dim=1)).clamp(min=1).to(total.dtype)
    return total / count


def _compact(t: Tensor) -> Tensor:
    """Undo broadcast views: narrow every stride-0 dimension to size 1 (no copy)."""
    for d in range(t.ndim):
        if t.shape[d] > 1 and t.stride(d) == 0:
            t = t.narrow(d, 0, 1)
    return t
