"""The sampling shift a checkpoint's own scheduler uses, read from its ``scheduler/scheduler_config.json``.

The shifted schedule of `policy.rollout.sigma_schedule` takes one number, ``shift``. The checkpoints disagree on
it: diffusers' Wan 2.2 TI2V-5B conversion saves a ``UniPCMultistepScheduler`` with ``flow_shift`` 5.0, Wan 2.1
I2V 480P one with 3.0. A fixed default therefore sampled one of them off its own schedule.

How diffusers names it (0.42):

* ``FlowMatchEulerDiscreteScheduler``: ``shift`` (default 1.0), unless ``use_dynamic_shifting`` (a shift that
  depends on the sequence length, ``mu``; no single number) or ``shift_terminal`` (the shifted schedule stretched
  to end at that sigma, LTX-Video's 0.1: its ``shift`` alone was read, and the run sampled another schedule).
* ``UniPCMultistepScheduler`` (and the other multistep solvers with flow sigmas): ``flow_shift`` (default 1.0),
  used only with ``use_flow_sigmas``; with Karras / exponential / beta sigmas (Cosmos-Predict2.5's Karras
  schedule, `policy.cosmos`'s module docstring) or dynamic shifting no shift reproduces the schedule.

Decisions where the brief was silent:

* A scheduler with no single shift, an unknown class, or no config (a tiny test model, a folder without
  ``scheduler/``, a hub repo that answers it has no ``scheduler/scheduler_config.json``, offline too where the HF
  cache recorded that answer) is not an error: the caller falls back to ``DEFAULT_SHIFT`` and says why
  (`ShiftChoice.source`), since the project's schedule is its own choice there.
* A config that may be there but could not be read (the hub not reached and the file not in its cache, access
  refused, a file that is no JSON object) is `policy.checkpoint.CheckpointFileUnreadable`, not that fallback: it
  used to fall back to 3.0 with a line on stdout, so an RL run of Wan 2.2 TI2V-5B (5.0) launched while the hub was
  down sampled, trained and recorded another schedule than the same launch an hour later. The launch refuses it,
  naming ``--shift`` (training/sampler_shift.py ``resolve_shift``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policy.checkpoint import load_checkpoint_json

DEFAULT_SHIFT = 3.0
"""The shift used when the checkpoint's scheduler names none (the project's default before it read them)."""


@dataclass(frozen=True)
class ShiftChoice:
    """A sampling shift and where it came from, for the run's log."""

    value: float
    source: str


def scheduler_shift(config: Mapping[str, Any]) -> tuple[float | None, str]:
    """(the shift of a diffusers scheduler config, how it was read), or (None, why it has no single one)."""
    name = config.get("_class_name", "an unnamed scheduler")
    if config.get("use_dynamic_shifting"):
        return None, f"{name} shifts by sequence length (use_dynamic_shifting)"
    other = [k for k in ("use_karras_sigmas", "use_exponential_sigmas", "use_beta_sigmas") if config.get(k)]
    if other:
        return None, f"{name} samples on {other[0].removeprefix('use_')}, which no shift reproduces"
    if terminal := config.get("shift_terminal"):  # diffusers stretches only when it is set and not 0
        return None, f"{name} stretches its schedule to end at shift_terminal {terminal}, which no shift reproduces"
    if name == "FlowMatchEulerDiscreteScheduler":
        key = "shift"
    elif "flow_shift" in config or "use_flow_sigmas" in config:
        if not config.get("use_flow_sigmas"):
            return None, f"{name} does not use flow sigmas (use_flow_sigmas false)"
        key = "flow_shift"
    else:
        return None, f"{name} has no flow-matching shift"
    value = config.get(key, 1.0)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
        return None, f"{name}'s {key} is {value!r}, not a positive number"
    return float(value), f"{name} {key}"


def read_scheduler_config(root: str | Path, revision: str | None = None) -> dict[str, Any] | None:
    """``scheduler/scheduler_config.json`` of a local checkpoint folder, or of a hub id at ``revision`` (diffusers'
    ``load_config``, any scheduler class: it reads the file as it is); None when it has none,
    `policy.checkpoint.CheckpointFileUnreadable` when it could not be read (module docstring)."""

    def load_config(*args: Any, **kwargs: Any) -> Any:
        from diffusers import UniPCMultistepScheduler

        return UniPCMultistepScheduler.load_config(*args, **kwargs)

    return load_checkpoint_json(root, "scheduler", "scheduler_config.json", revision, load_config)


def checkpoint_shift(root: str | Path | None, revision: str | None = None) -> ShiftChoice:
    """The shift the checkpoint at ``root`` samples with (`scheduler_shift`), else ``DEFAULT_SHIFT`` and why;
    `policy.checkpoint.CheckpointFileUnreadable` when its scheduler config could not be read (module docstring)."""
    if root is None:
        return ShiftChoice(DEFAULT_SHIFT, "the default (no checkpoint to read a scheduler from)")
    config = read_scheduler_config(root, revision)
    if config is None:
        return ShiftChoice(DEFAULT_SHIFT, f"the default ({root} has no scheduler/scheduler_config.json)")
    value, how = scheduler_shift(config)
    if value is None:
        return ShiftChoice(DEFAULT_SHIFT, f"the default ({root}'s {how})")
    return ShiftChoice(value, f"{root}'s scheduler ({how})")
