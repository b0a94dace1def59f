"""The DeepSpeed JSON a ``TrainConfig.ds_config`` names: found (a bare file name is a bundled
``training/configs/`` file) and read, with a ConfigError naming the file for anything unreadable.

Split out of ``training.config`` (the dataclass and its pure validation) as the one part that reads files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tools.jsonl import parsed_file
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
        data = parsed_file(path)  # UTF-8, a BOM (Windows editors) skipped
    except OSError as exc:
        raise ConfigError(f"ds_config {str(path)!r} cannot be read: {exc.strerror or exc}") from None
    except ValueError as exc:  # JSONDecodeError, and text that is not UTF-8 (NotUtf8Error)
        raise ConfigError(f"ds_config {str(path)!r} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"ds_config {str(path)!r} must hold a JSON object, got {type(data).__name__}")
    return data


PRECISION_SECTIONS = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16"}
"""DeepSpeed's precision sections (``bfloat16`` is its older name of ``bf16``) and the ``TrainConfig.dtype`` each
one means."""


def precision_problem(ds: dict[str, Any], dtype: str, name: str) -> str | None:
    """Why the DeepSpeed JSON ``ds`` (file ``name``) cannot run a ``dtype`` run, or None. ``dtype`` is the run's
    one precision setting: the trainer enables the matching section itself, and the frozen reference, each
    checkpoint's layout.json, the export and ``load_policy`` follow it. A JSON that enables another precision
    (most DeepSpeed examples carry ``"bf16": {"enabled": true}``) made the engine cast the policy to it while
    all of those assumed ``dtype`` (a float32 reference beside a bf16 policy: mu-KL not 0 at an unchanged
    policy), or, beside the section the trainer enables, DeepSpeed's own assertion after the model had loaded."""
    for key, meant in PRECISION_SECTIONS.items():
        section = ds.get(key)
        if isinstance(section, dict) and section.get("enabled") and meant != dtype:
            return (f"ds_config {name!r} enables {key} but dtype is {dtype}: dtype sets the run's precision (the "
                    f"trainer enables DeepSpeed's section for it): set dtype: {meant} (--dtype {meant}) to train "
                    f"in it, or remove the JSON's {key} section")
    return None


def scheduler_problem(ds: dict[str, Any], name: str) -> str | None:
    """Why the DeepSpeed JSON ``ds`` (file ``name``) may not have a ``scheduler`` section, or None. The learning
    rate is the config's (``learning_rate``, ``lr_warmup_steps``, ``lr_schedule``, ``min_lr_ratio``:
    training.lr_schedule.lr_scheduler): a JSON scheduler was ignored when those set one (DeepSpeed prefers the
    trainer's), replaced the config's constant rate otherwise, restarted on a resume (its state is not loaded)
    and then failed there with an AttributeError (the resume sets the rate through the trainer's LambdaLR)."""
    if ds.get("scheduler") is None:
        return None
    return (f"ds_config {name!r} has a scheduler section: the learning rate is set by the config's learning_rate, "
            "lr_warmup_steps, lr_schedule (constant, linear, cosine) and min_lr_ratio; remove the JSON's scheduler "
            "and set those instead")


def check_ds_json(ds: dict[str, Any], dtype: str, name: str) -> None:
    """ConfigError with `precision_problem` or `scheduler_problem` of the DeepSpeed JSON ``ds`` (file ``name``, as
    `read_ds_config` read it): at the launch before the model loads, and where the engine builds its config."""
    if problem := precision_problem(ds, dtype, name) or scheduler_problem(ds, name):
        raise ConfigError(problem)
