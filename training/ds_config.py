"""The DeepSpeed JSON a ``TrainConfig.ds_config`` names: found (a bare file name is a bundled
``training/configs/`` file) and read, with a ConfigError naming the file for anything unreadable.

Split out of ``training.config`` (the dataclass and its pure validation) as the one part that reads files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from training.config import ConfigError

CONFIG_DIR = Path(__file__).resolve().parent / "configs"
"""The bundled DeepSpeed JSONs and example configs."""


def resolve_ds_config(name: str) -> Path:
    """The DeepSpeed JSON path: as given when it exists, else the bundled training/configs/NAME."""
    path = Path(name)
    if path.exists():
        return path
    bundled = CONFIG_DIR / path.name
    if path.parent == Path(".") and bundled.exists():
        return bundled
    raise ConfigError(f"ds_config {name!r} not found (bundled files: "
                      f"{sorted(p.name for p in CONFIG_DIR.glob('*.json'))})")


def read_ds_config(name: str) -> dict[str, Any]:
    """The DeepSpeed JSON ``name`` names (`resolve_ds_config`) as a dict; ConfigError naming the file when it
    is missing, unreadable, not valid JSON or not a JSON object (DeepSpeed's own traceback came after
    the model had loaded)."""
    path = resolve_ds_config(name)
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))  # a BOM (Windows editors) is skipped
    except OSError as exc:
        raise ConfigError(f"ds_config {str(path)!r} cannot be read: {exc.strerror or exc}") from None
    except ValueError as exc:  # JSONDecodeError, and text that is not UTF-8
        raise ConfigError(f"ds_config {str(path)!r} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"ds_config {str(path)!r} must hold a JSON object, got {type(data).__name__}")
    return data
