"""The run's sampling shift: the config's, else (a resume) the run's saved one, else the checkpoint's.

``TrainConfig.shift`` None means "the checkpoint's" (`policy.schedule_shift.checkpoint_shift`). A launch
resolves it once, before anything samples, and the run's ``config.yaml`` records the number, so an export, a
sample (training/generate.py) and a resume use what the run trained with. A resume without a shift of its own
takes the saved config's: the checkpoint's scheduler (or this code's reading of it) may have changed since, and
a resumed run must not move to another schedule without a word. A resume that sets one is listed with the other
changed settings (`config_resume.config_changes`).

Decisions where the issue was silent:

* A saved config whose ``shift`` is no positive number (``shift: null`` written by hand: a launch always records
  the number) is refused on resume, naming ``--shift``, as `sampling_shift` refuses it in training.generate and
  an export: the resume used to take the checkpoint's shift in silence, so the run could go on with a schedule
  the generate of the same run refused. What the run sampled with is unknown there; only the user can say.
* A resume whose saved config.yaml is missing or cannot be read takes the checkpoint's, and its line says why
  (``not the resumed run's: ...``), as the checkpoint's fallbacks do.
* A checkpoint whose scheduler config could not be read (the hub not reached and the file not cached) stops the
  launch naming ``--shift`` (policy/schedule_shift.py; a resume's says ``not the resumed run's: ...`` too): a
  run sampled with the 3.0 fallback, an RL run's distribution changed by an outage, with one line on stdout. Only a checkpoint that has no such config (a tiny
  model, a folder or a hub repo without one) or whose scheduler has no single shift falls back to 3.0.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from policy.checkpoint import CheckpointFileUnreadable
from policy.rollout import RolloutConfigError
from policy.schedule_shift import checkpoint_shift
from training.config import ConfigError, TrainConfig
from training.finite import finite_number


def saved_shift(out_dir: str | Path) -> tuple[float | None, str]:
    """(the shift of the run's saved ``config.yaml`` in ``out_dir``, ``""``): 3.0 for one from before it was
    recorded (`config_io.FIELD_DEFAULTS_BEFORE`); (None, why) without one that reads. Only the field is read: a
    saved config that today's checks refuse as a whole (a value a later version refuses, a field it does not know)
    still says what the run sampled with, which the checkpoint's scheduler may not. ConfigError for a saved shift
    that is no positive finite number (``shift: null`` by hand), as `sampling_shift` refuses it (module docstring)."""
    from training.config_io import read_saved_fields

    path = Path(out_dir) / "config.yaml"
    if not path.is_file():
        return None, f"{path} does not exist"
    try:
        fields = read_saved_fields(path)
    except (OSError, ConfigError) as exc:
        return None, f"{path} cannot be read: {exc}"
    value = fields.get("shift")
    if finite_number(value) and value > 0:
        return float(value), ""
    raise ConfigError(f"--resume: {path} holds shift: {value!r}, not the positive number the run sampled with (a "
                      "launch records it; training.generate refuses such a config too); pass --shift N, the run's "
                      "sampling shift (its launch printed `sampling shift N (...)`), to resume it")


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
    value, why = saved_shift(cfg.output_dir) if cfg.resume else (None, "")
    if value is not None:
        return dataclasses.replace(cfg, shift=value), f"sampling shift {value:g} (the resumed run's config.yaml)"
    unsaved = f"; not the resumed run's: {why}" if why else ""
    try:
        choice = checkpoint_shift(None if cfg.tiny else cfg.model_path, cfg.model_revision)
    except CheckpointFileUnreadable as exc:  # not the fallback: it may say another number (module docstring)
        raise ConfigError(f"shift: unset, and the checkpoint's own cannot be read: {exc}{unsaved}. Pass --shift N "
                          "(shift: N in the config: the checkpoint's scheduler's flow_shift or shift, e.g. 5 for Wan "
                          "2.2 TI2V-5B, 3 for Wan 2.1 I2V 480P), or launch where its scheduler config can be read (a "
                          "run must not sample with the 3.0 fallback because the hub was down)") from exc
    return dataclasses.replace(cfg, shift=choice.value), f"sampling shift {choice.value:g} ({choice.source}{unsaved})"
