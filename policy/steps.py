"""Which sampler steps enter the GRPO update: a torch-free rule shared by the rollout, the update and the
training config's checks (which run before any heavy import: ``--help``, config errors)."""

from __future__ import annotations


def likelihood_steps(num_steps: int, sde_window: tuple[int, int]) -> range:
    """Steps of the SDE window that record a transition for the update: those with ``sigma_next > 0``
    (the window without the last step, whose DynDiff std is 0). Empty for a window of only the last step."""
    start, end = sde_window
    return range(start, min(end, num_steps - 1))
