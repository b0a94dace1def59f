"""The output folder of `training.generate`: claimed for one call's settings (``generate.json``, `claim_folder`) and
resumed from its manifest (`resume_keys`); the decisions are in `training.generate`'s docstring ("Resumable")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tools.jsonl import parsed_file, read_text, text_lines, write_text_atomic

SETTINGS_FILE = "generate.json"


class GenerateError(ValueError):
    """Settings that cannot be used (an output folder made with other settings, a bad sampler setup)."""


def claim_folder(out: Path, settings: dict[str, Any]) -> None:
    """Create `out` for these settings, or check that an earlier call used the same ones."""
    if out.exists() and not out.is_dir():  # mkdir's FileExistsError named no option
        raise GenerateError(f"--out {out} is a file, not a folder; choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    file = out / SETTINGS_FILE
    if file.is_file():
        try:
            earlier = parsed_file(file)
        except json.JSONDecodeError:
            earlier = None
        if isinstance(earlier, dict) and "noise_device" not in earlier and "noise_device" in settings:  # an older folder
            earlier["noise_device"] = settings["noise_device"]
        if earlier == settings:
            return
        # taken over when it holds no row and no video (a hidden file in videos/ is a cut write's temporary)
        manifest, videos = out / "manifest.jsonl", out / "videos"
        rows = manifest.is_file() and any(line.strip() for line in text_lines(read_text(manifest)))
        if rows or (videos.is_dir() and any(not v.name.startswith(".") for v in videos.iterdir())):
            raise GenerateError(_refusal(out, earlier if isinstance(earlier, dict) else None, settings))
    elif (out / "manifest.jsonl").exists():
        raise GenerateError(f"{out} has a manifest.jsonl but no {SETTINGS_FILE}; choose another --out")
    write_text_atomic(file, json.dumps(settings, indent=2))  # in place, a crash left a cut file that refused the folder


def _refusal(out: Path, earlier: dict[str, Any] | None, settings: dict[str, Any]) -> str:
    """Why `out` is refused: the keys whose values differ, each earlier -> now, and when the export's identity
    (source checkpoint, time) changed in the same folder, that the policy there was exported again."""
    changed = sorted(k for k in settings if earlier is None or earlier.get(k) != settings[k])
    text = f"{out} holds videos generated with other settings (differing: {changed})"
    if earlier is not None:
        text += ": " + ", ".join(f"{k} {earlier.get(k)!r} -> {settings[k]!r}" for k in changed)
        if {"source", "created"} & set(changed) and earlier.get("policy") == settings.get("policy"):
            text += f" ({settings['policy']} was exported again since: another run's or checkpoint's policy)"
    return text + "; choose another --out"


REQUIRED = ("path", "instruction", "key")
"""The fields of a manifest row `raa score-batch` and `raa eval compare` need, each non-empty text."""


def _whole(row: Any) -> bool:
    """Whether a manifest line's row holds every `REQUIRED` field as non-empty text. A row with one removed or
    emptied by hand was kept: without ``key`` it counted the key "None" as done (its video was generated again
    and a second row appended beside it), without ``instruction`` it reached score-batch as a bad line. Dropped,
    its video is generated again under a whole row."""
    return isinstance(row, dict) and all(isinstance(row.get(k), str) and row[k] for k in REQUIRED)


def resume_keys(manifest: Path, iteration: Any) -> set[str]:
    """Keys of the videos already in the manifest whose file exists. Other lines (a row torn by an
    interrupted write, a row whose video is gone, a row missing a field `REQUIRED` names: `_whole`) are dropped from the manifest, rewritten in place, so
    it never hands `raa score-batch` a broken line. A kept row of another ``iteration`` (an older base row: the
    export's) gets this call's: one folder, one policy (generate.json), never files videos under two iterations."""
    if not manifest.exists():
        return set()
    keys, kept = set(), []
    text = read_text(manifest)  # a leading BOM skipped
    lines = text_lines(text)
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if _whole(row) and (manifest.parent / row["path"]).is_file():
            keys.add(row["key"])
            kept.append(line if row.get("iteration") == iteration else json.dumps({**row, "iteration": iteration}))
    if kept != lines or (text and not text.endswith("\n")):  # a last row cut before its newline: closed
        partial = manifest.with_name(f".{manifest.name}.partial")
        partial.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
        partial.replace(manifest)
    return keys
