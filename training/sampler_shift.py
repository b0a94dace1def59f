"""The run's sampling shift: the config's, else (a resume) the run's saved one, else the checkpoint's.

``TrainConfig.shift`` None means "the checkpoint's" (`policy.schedule_shift.checkpoint_shift`). A launch
resolves it once, before anything samples, and the run's ``config.yaml`` records the number, so an export, a
sample (training/generate.py) and a resume use what the run trained with. A resume without a shift of its own
takes the saved config's: the checkpoint's scheduler (or this code's reading of it) may have changed since, and
a resumed run must not move to another schedule without a word. A resume that sets one is listed with the other
changed settings (`config_io.config_changes`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from policy.rollout import RolloutConfigError
from policy.schedule_shift import checkpoint_shift
from training.config import ConfigError, TrainConfig
from training.finite import finite_number


def saved_shift(out_dir: str | Path) -> float | None:
    """The shift of the run's saved ``config.yaml`` in ``out_dir`` (3.0 for one from before it was recorded,
    `config_io.FIELD_DEFAULTS_BEFORE`); None without one that reads or a shift that is no positive finite number.
    Only the field is read: a saved config that today's checks refuse as a whole (a value a later version refuses,
    a field it does not know) still says what the run sampled with, which the checkpoint's scheduler may not."""
    from training.config_io import read_saved_fields

    path = Path(out_dir) / "config.yaml"
    if not path.is_file():
        return None
    try:
        value = read_saved_fields(path).get("shift")
    except (OSError, ConfigError):
        return None
    return float(value) if finite_number(value) and value > 0 else None


def sampling_shift(cfg: TrainConfig) -> float:
    """``cfg.shift`` as the number a sampler takes; RolloutConfigError while it is None (the checkpoint's, not yet
    resolved by `resolve_shift`; a saved config holding ``shift: null`` by hand) rather than a sampler failing on it."""
    if cfg.shift is None:
        raise RolloutConfigError("shift is unset (None = the checkpoint's): a launch resolves it "
                                 "(training.sampler_shift.resolve_shift) and a run's saved config holds the number")
    return cfg.shift


def resolve_shift(cfg: TrainConfig) -> tuple[TrainConfig, str]:
    """(``cfg`` with a numeric ``shift``, a line saying which and why): the config's when set, the saved run's on
    a resume, else the checkpoint scheduler's (``DEFAULT_SHIFT`` for a tiny model or a scheduler without one)."""
    if cfg.shift is not None:
        return cfg, f"sampling shift {cfg.shift:g} (set in the config)"
    if cfg.resume and (value := saved_shift(cfg.output_dir)) is not None:
        return dataclasses.replace(cfg, shift=value), f"sampling shift {value:g} (the resumed run's config.yaml)"
    choice = checkpoint_shift(None if cfg.tiny else cfg.model_path, cfg.model_revision)
    return dataclasses.replace(cfg, shift=choice.value), f"sampling shift {choice.value:g} ({choice.source})"
