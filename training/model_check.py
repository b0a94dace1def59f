"""Whether ``model_path`` holds what a launch loads, checked before any model loads (``--check`` and a launch).

A ``model_path`` that did not exist used to pass ``--check``; the launch then died in every rank about a
minute later with ``OSError: ... does not appear to have a file named config.json``.

`check_model_path` reads what `policy.world_model.FlowWorldModel.from_pretrained` (with
`policy.text`'s encoders) reads for the parts a launch loads (`training.models.build_world_model`):

- a local folder must hold ``transformer/config.json``, ``vae/config.json``, ``text_encoder/config.json``
  and a ``tokenizer/`` folder (``parts="transformer"``, the exporter's: the first only); the missing ones
  are named with ``model_path``;
- anything else is a hub id: fine when those files are in the Hugging Face cache (no request); otherwise
  the launch downloads them, so the hub is asked once (`tools.hub.hub_reachable`, 3 s, the probe the
  V-JEPA 2 loader uses): it answers -> a note that the launch will download it; no answer, or
  ``HF_HUB_OFFLINE`` set -> ConfigError naming ``model_path``.

Decisions where the issue was silent: only the ``config.json`` files (and the tokenizer folder) are
checked, not the weight files: a folder from ``hf download`` or ``save_pretrained`` has both,
and a half-copied folder's weights are the loader's to report. A string that is not a valid repo id and
not a folder (an absolute path that does not exist) is an error without a request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from training.config import ConfigError, TrainConfig

TRANSFORMER = "transformer/config.json"
WHOLE = (TRANSFORMER, "vae/config.json", "text_encoder/config.json")
"""The files ``from_pretrained`` reads first, per part (the tokenizer folder is checked apart)."""


def _needed(parts: Literal["all", "transformer"]) -> tuple[str, ...]:
    return WHOLE if parts == "all" else (TRANSFORMER,)


def _folder_missing(root: Path, parts: Literal["all", "transformer"]) -> list[str]:
    missing = [name for name in _needed(parts) if not (root / name).is_file()]
    if parts == "all" and not (root / "tokenizer").is_dir():
        missing.append("tokenizer/")
    return missing


def check_model_path(cfg: TrainConfig, parts: Literal["all", "transformer"] = "all") -> str | None:
    """ConfigError when ``cfg.model_path`` cannot give the model a launch loads (see the module docstring);
    otherwise None, or a note (the launch will download the model from the hub). Nothing for ``tiny``."""
    if cfg.tiny or not cfg.model_path:
        return None  # tiny builds its model; a missing model_path is the config's own error
    path = cfg.model_path
    root = Path(path).expanduser()
    if root.is_dir():
        missing = _folder_missing(root, parts)
        if missing:
            raise ConfigError(f"model_path {path}: missing {', '.join(missing)} (a diffusers-layout checkpoint "
                              "folder is expected: transformer/, vae/, text_encoder/ and tokenizer/; see the "
                              "config's comments for the download command)")
        return None
    if root.exists():
        raise ConfigError(f"model_path {path} is a file; a diffusers-layout checkpoint folder or a hub id is expected")
    from huggingface_hub.utils import HFValidationError

    from tools.hub import cached_file, download_blocked

    try:
        cached = [cached_file(path, name) is not None for name in _needed(parts)]
    except HFValidationError:
        raise ConfigError(f"model_path {path} is not a folder (checked from {Path.cwd()}) and not a hub id") from None
    if all(cached):
        return None
    where = f"not a folder (checked from {Path.cwd()}), not in the Hugging Face cache"
    if blocked := download_blocked():
        raise ConfigError(f"model_path {path} is {where}, and {blocked}: download the checkpoint and point "
                          "model_path at the folder")
    return (f"note: model_path {path} is {where}: the launch downloads it from the hub (if it is meant to be a "
            "folder, it does not exist)")
