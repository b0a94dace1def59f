"""Checks shared by the DynDiff functions (policy/dyndiff.py, policy/dyndiff_mask.py): a latent's shape, and
whether in-place arithmetic is safe (no autograd graph is built through the tensors)."""

from __future__ import annotations

import torch
from torch import Tensor

from policy.errors import DynDiffInputError


def check_latent(name: str, x: Tensor) -> None:
    """DynDiffInputError naming ``name`` unless ``x`` is a latent [B, C, F, H, W] (5 dims)."""
    if x.ndim != 5:
        raise DynDiffInputError(f"{name} must be a latent [B, C, F, H, W], got shape {tuple(x.shape)}")


def no_grad_needed(*tensors: Tensor) -> bool:
    """True when no autograd graph is being built through ``tensors`` (in-place ops are safe)."""
    return not torch.is_grad_enabled() or not any(t.requires_grad for t in tensors)
