"""A resumed launch against the run's saved ``config.yaml``: what it changes (`config_changes`, printed by the
trainer as a warning) and what it cannot change (`resume_conflicts`, which stop the launch); split from
training/config_io.py (reading and writing configs), whose reading of a saved config it uses."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from training.config import ConfigError, TrainConfig
from training.config_io import absolute_paths, config_to_dict, read_mapping, saved_config, saved_config_dict

RESUME_NEUTRAL = frozenset({"resume", "output_dir", "overwrite_output_dir", "max_iterations", "checkpoint_every",
                            "keep_checkpoints", "eval_every", "on_signal", "progress", "tensorboard",
                            "wandb_project", "export", "reward_timeout_s"})
"""Fields a resumed launch commonly changes without changing what is trained (more iterations, other
checkpoint / evaluation intervals, console and logging; output_dir, which a resume names as it likes:
relative or absolute; how long a reward call may hang, raised after one timed out): `config_changes` does
not list them."""


RESUME_FIXED = ("backend", "model_path", "model_revision", "tiny", "finetune", "lora_rank", "lora_alpha",
                "lora_targets")
"""Fields that decide which parameters the checkpoint holds, or what they mean: a resume cannot change them,
so `resume_conflicts` names them and the launch stops first. For most, DeepSpeed's load fails on the mismatch
after the model has loaded; ``lora_alpha`` (the adapter's scale, alpha / rank) is no parameter, so it loaded
and trained on at another scale, and since every launch rewrites config.yaml, which the exporter rebuilds the
adapter from, an earlier checkpoint exported afterwards applied its A and B at the new scale."""


def config_changes(saved: Mapping[str, Any], cfg: TrainConfig) -> list[str]:
    """``field: saved -> now`` for each field ``cfg`` sets differently from a run's saved config (as
    plain values, file settings made absolute: `absolute_paths`), except ``RESUME_NEUTRAL`` ones. A field the saved config predates counts as its
    ``FIELD_DEFAULTS_BEFORE`` value, else as its default; fields unknown to this version are listed. The
    order of lora_targets is no change, nor model_path / model_revision while both launches are tiny (not read)."""
    before = absolute_paths({**config_to_dict(TrainConfig()), **saved_config_dict(saved)})
    now = absolute_paths(config_to_dict(cfg))  # config.yaml stores them absolute: the same file is no change
    same = {"lora_targets": lambda a, b: isinstance(a, list) and isinstance(b, list) and set(a) == set(b),
            "model_path": lambda a, b: before["tiny"] is True and now["tiny"] is True,
            "model_revision": lambda a, b: before["tiny"] is True and now["tiny"] is True}
    out = [f"{k}: {before[k]!r} -> {v!r}" for k, v in now.items() if k not in RESUME_NEUTRAL and before[k] != v
           and not (k in same and same[k](before[k], v))]
    return out + [f"{k}: {before[k]!r} -> (no such field now)" for k in before if k not in now]


def resume_conflicts(changes: list[str], cfg: TrainConfig) -> list[str]:
    """The lines of `changes` (`SavedRun.changes` of the launch ``cfg``) that name a `RESUME_FIXED` field: the
    LoRA ones only when ``cfg`` trains LoRA; none without a readable saved config (then DeepSpeed's load is
    the check)."""
    fixed = RESUME_FIXED if cfg.finetune == "lora" else tuple(f for f in RESUME_FIXED if not f.startswith("lora_"))
    return [line for line in changes if line.split(":", 1)[0] in fixed]


@dataclasses.dataclass(frozen=True)
class SavedRun:
    """A resumed run's saved ``config.yaml``, read once."""

    config: TrainConfig | None
    """The run's config as trained; None without a config.yaml, or with one that cannot be read or no longer
    validates."""
    changes: list[str]
    """`config_changes` of the launch against it (one line saying so when it cannot be read)."""


def read_saved_run(path: str | Path, cfg: TrainConfig) -> SavedRun:
    """The run's saved ``config.yaml`` at ``path`` and what the launch ``cfg`` changes against it."""
    if not Path(path).is_file():
        return SavedRun(None, [])
    try:
        data = read_mapping(Path(path))
    except (OSError, ConfigError) as exc:
        return SavedRun(None, [f"cannot list the changes: {exc}"])
    try:
        saved: TrainConfig | None = saved_config(data, str(path))
    except ConfigError:
        saved = None
    return SavedRun(saved, config_changes(data, cfg))

