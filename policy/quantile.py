"""Order-statistic selection for the DynDiff mask (DESIGN.md §5: quantiles must work on latents larger
than 16M elements, where ``torch.quantile`` refuses).

* :func:`quantile_large` reproduces ``torch.quantile(..., interpolation="linear")`` with one
  ``torch.kthvalue`` call plus a masked minimum (O(n) selection, no full sort, no 16M-element limit).
* :func:`kth_smallest_last` is the single selection ``policy.dyndiff_mask.dynamic_mask`` needs (NumPy's
  ``partition`` on CPU, about twice as fast as ``torch.kthvalue``; ``kthvalue`` elsewhere).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from policy.errors import DynDiffInputError


def quantile_large(x: Tensor, q: float, dim: int = -1) -> Tensor:
    """``torch.quantile(x, q, dim, interpolation="linear")`` without the 16M-element limit.

    With n values along ``dim`` the quantile sits at position ``p = q (n - 1)`` of the sorted
    values; the result is ``lo + (hi - lo)(p - floor(p))`` where ``lo``/``hi`` are the
    ``floor(p)``-th and ``ceil(p)``-th order statistics: one ``torch.kthvalue`` (selection,
    not a full sort) and one masked minimum. NaNs are not supported. The reduced dimension is
    removed.
    """
    if not 0.0 <= float(q) <= 1.0:
        raise DynDiffInputError(f"quantile q must be in [0, 1], got {q}")
    n = x.shape[dim]
    if n == 0:
        raise DynDiffInputError("quantile over an empty dimension")
    pos = float(q) * (n - 1)
    lo_i = int(math.floor(pos))
    hi_i = min(lo_i + 1, n - 1)
    frac = pos - lo_i
    lo = torch.kthvalue(x, lo_i + 1, dim=dim).values
    if frac == 0.0 or hi_i == lo_i:
        return lo
    # The next order statistic without a second selection: it equals ``lo`` when more than
    # lo_i + 1 values are <= lo (ties), else it is the smallest value strictly above ``lo``.
    lo_k = lo.unsqueeze(dim)
    n_le = (x <= lo_k).sum(dim=dim)
    above = torch.where(x > lo_k, x, torch.full_like(x, float("inf"))).amin(dim=dim)
    hi = torch.where(n_le >= hi_i + 1, lo, above)
    return lo + (hi - lo) * frac


def kth_smallest_last(x: Tensor, k: int) -> Tensor:
    """The ``k``-th smallest value (1-based) along the last dim of a detached tensor; the dim is removed.

    On CPU this is NumPy's introselect (about twice as fast as ``torch.kthvalue``, which also tracks
    indices); identical values, since both return an element of the input."""
    if x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64):
        import numpy as np

        part = np.partition(x.contiguous().numpy(), k - 1, axis=-1)
        return torch.from_numpy(np.ascontiguousarray(part[..., k - 1]))
    return torch.kthvalue(x, k, dim=-1).values
