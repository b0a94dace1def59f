"""The 0/1 check of the conditioning masks (DESIGN.md §5: a latent frame is a condition, 0, or generated, 1).

A conditioning mask says whether a latent frame is generated (1) or a condition (0); nothing lies between, and
each consumer reads it its own way: ``policy.dyndiff.gaussian_log_prob`` counts any nonzero weight as a whole
element, ``training.grpo.mean_kl`` weighs its elements by it, ``policy.dyndiff.transition_mean_std`` blends the
mean towards ``x_t`` and scales the std by it. A fractional value would therefore mean three different things at
once, so every one of them refuses it. The DynDiff mask M is the fractional one (``r_base <= M <= 1``); its binary
part B is a bool tensor.
"""

from __future__ import annotations

from torch import Tensor

from policy.errors import DynDiffInputError


def check_binary_mask(name: str, mask: Tensor) -> None:
    """DynDiffInputError (a ValueError) naming ``name`` unless every value of ``mask`` is 0 or 1 (NaN included)."""
    if bool(((mask != 0) & (mask != 1)).any()):
        bad = mask[(mask != 0) & (mask != 1)].flatten()[:3].tolist()
        raise DynDiffInputError(f"{name} must hold only 0 or 1 (0: conditioning frame, 1: generated), got e.g. {bad}")
