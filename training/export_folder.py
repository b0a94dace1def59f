"""A policy export folder (training/export.py makes and loads the weights in it): export.json, writing the folder
in place, and reading it back.

    OUT/export.json           format, finetune mode, iteration, source checkpoint and the run's TrainConfig
    OUT/transformer_lora/     finetune: lora -> the peft adapter
    OUT/transformer/          finetune: full -> the transformer in diffusers layout

Decisions where the issue was silent:

* The folder is written beside OUT and renamed into place, export.json last: a folder without
  export.json is not an export and ``read_export`` (so ``load_policy``) refuses it. An existing OUT is replaced only when it
  is an earlier export (or empty); anything else there is an error, never deleted. An earlier export is
  renamed aside before the new one moves in and deleted after, so a kill leaves a whole export or none;
  the next export into OUT moves an export a kill left aside back (when OUT is missing) and deletes the
  hidden ``.OUT-*`` folders a kill left.
* File settings (``dataset_file``, ``eval_dataset_file``, prompt images, a local ``model_path``) are stored
  as absolute paths (``config_io.absolute_paths``), so the export's prompts and base model resolve from any
  directory; a ``dataset_file`` that does not exist is an ExportError, not a path ``generate`` cannot open.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from policy.diffusers_model import save_pretrained
from policy.world_model import FlowWorldModel
from tools.file_kinds import read_at
from tools.jsonl import parsed_file
from training.config import TrainConfig
from training.config_io import absolute_paths, config_to_dict, saved_config

EXPORT_FILE = "export.json"
FORMAT = "raa-policy-export/1"


class ExportError(RuntimeError):
    """A checkpoint that cannot be exported, or a folder that is not a usable export."""


def save_policy(world_model: FlowWorldModel, cfg: TrainConfig, out: Path, *, iteration: int | None,
                source: str) -> Path:
    """Write the transformer's trained weights and export.json to `out` (see module docstring)."""
    out = Path(out)
    check_prompt_file(cfg)
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} exists and is not a folder; choose another output")
    if out.exists() and not (out / EXPORT_FILE).is_file() and any(out.iterdir()):
        raise ExportError(f"{out} exists and is not an export folder; choose another output")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        _tidy_killed(out)
        work = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    except OSError as exc:  # a parent that is a file, no permission, a read-only or full disk
        raise _unwritable(out, exc) from None
    old = work.with_name(work.name + "-old")
    try:
        folder = "transformer_lora" if cfg.finetune == "lora" else "transformer"
        save_pretrained(world_model.transformer, str(work / folder))
        info = {"format": FORMAT, "finetune": cfg.finetune, "weights": folder, "iteration": iteration,
                "source": source, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "config": absolute_paths(config_to_dict(cfg))}
        (work / EXPORT_FILE).write_text(json.dumps(info, indent=2))
        if out.exists():  # moved aside, deleted once replaced: a kill while deleting it in place left OUT
            out.rename(old)  # without export.json, which every later export refused to replace
        work.rename(out)
    except BaseException as exc:
        if old.exists() and not out.exists():
            old.rename(out)
        shutil.rmtree(work, ignore_errors=True)
        if isinstance(exc, OSError):  # the disk filled up or went read-only while writing
            raise _unwritable(out, exc) from None
        raise
    shutil.rmtree(old, ignore_errors=True)
    return out


def _unwritable(out: Path, exc: OSError) -> ExportError:
    """The export to `out` could not be written (`exc`: a parent that is a file, no permission, a full or
    read-only disk)."""
    return ExportError(f"cannot write the export to {out}: {type(exc).__name__}: {exc}")


def _tidy_killed(out: Path) -> None:
    """What an earlier `save_policy` into `out` killed part-way left beside it: an export moved aside while its
    replacement had not moved in yet (`out` missing) moves back; work folders and old exports go. Only its own:
    ``.OUT-<mkdtemp's random letters>[-old]``, not ``.OUT-lora-...`` of an output named ``OUT-lora``."""
    left = sorted(p for p in out.parent.glob(f".{out.name}-*")
                  if p.is_dir() and re.fullmatch(r"[a-z0-9_]+(-old)?", p.name[len(out.name) + 2:]))
    aside = [p for p in left if p.name.endswith("-old") and (p / EXPORT_FILE).is_file()]
    if not out.exists() and aside:
        aside[-1].rename(out)
    for p in left:
        if p.exists():
            shutil.rmtree(p, ignore_errors=True)


def check_prompt_file(cfg: TrainConfig) -> None:
    """ExportError when the ``dataset_file`` of ``cfg`` is not a file: the export stores it as an absolute path,
    for ``generate`` to read its prompts from by default. A run's config.yaml written before it stored absolute
    paths may hold one relative to the directory the run was launched from. (``eval_dataset_file`` is stored
    absolute too, but nothing after the export reads it.)"""
    value = cfg.dataset_file
    if value is None or Path(value).is_file():
        return
    where = "" if Path(value).is_absolute() else (
        f" (relative to the current directory {Path.cwd()}; a relative path in a run's config.yaml is relative "
        "to the directory the run was launched from: export from there, or write the absolute path into it)")
    raise ExportError(f"dataset_file {value!r} is not a file{where}; the export names the run's prompt file, which "
                      "`training.generate` samples by default")


def read_export(path: str | Path) -> tuple[dict[str, Any], TrainConfig]:
    """(export.json, the run's TrainConfig) of an export folder; ExportError for anything else."""
    path = Path(path)
    info_file = path / EXPORT_FILE
    kind, data = read_at(info_file)  # one look: a re-export moves OUT aside, and a read by name after is_file raised
    if kind is not None:
        inside = sorted((p for p in path.glob(f"*/{EXPORT_FILE}") if p.is_file()),
                        key=lambda p: (p.parent.name != "final", p.parent.name)) if path.is_dir() else []
        hint = (f"; did you mean {inside[0].parent}" + "".join(f" (or {p.parent})" for p in inside[1:3]) if inside
                else "; make one with `python -m training.export --run RUN_DIR`")
        raise ExportError(f"{path} is not a policy export (no {EXPORT_FILE}){hint}")
    try:
        info = parsed_file(info_file, data=data)
    except json.JSONDecodeError as exc:
        raise ExportError(f"{info_file}: not valid JSON ({exc.msg})") from None
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        found = info.get("format") if isinstance(info, dict) else info
        raise ExportError(f"{info_file}: unknown export format {found!r}")
    if info.get("weights") not in ("transformer", "transformer_lora") or info.get("finetune") not in ("lora", "full"):
        raise ExportError(f"{info_file}: 'weights' / 'finetune' missing or unknown")
    try:
        saved = info["config"]
        if not isinstance(saved, dict):
            raise ValueError(f"expected a mapping of TrainConfig fields, got {type(saved).__name__}")
        cfg = saved_config(saved, "export.json config")  # as its policy was trained (from before a field, too)
    except (ValueError, KeyError) as exc:
        raise ExportError(f"{info_file}: invalid config: {exc}") from None
    if not (path / info["weights"]).is_dir():
        raise ExportError(f"{path}: the weights folder {info['weights']!r} is missing")
    return info, cfg
