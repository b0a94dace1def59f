"""A clip-suite manifest read (`load_manifest`, `manifest_lines`; re-exported by `evals.clipsuite`) and one row of it
checked (`check_row`): the required fields, the label, and the optional fields' types and ranges. Split from
evals/clipsuite.py (its size).

``width`` and ``height`` were not checked: "128", 128.5, -1 or true came through as a clip's size (graph/demo.py
compares them with the suite's side, reports print them). They are whole numbers >= 1 now, like ``frames``;
the 16 to ``MAX_SIDE`` range is the renderer's (`evals.clipsuite`), not a manifest's, which may list clips
rendered elsewhere.

``fps`` must be a finite number > 0: Python's json reads ``Infinity`` (and ``NaN``) in a manifest line, and an
infinite frame rate passed the ``> 0`` check, so a manifest naming no real frame rate read as valid (NaN did not
pass; its message now says why too). The bounds are compared, not the value converted to a float: a whole number
too large for one is still > 0 (``math.isfinite`` raised OverflowError on it, a traceback).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Literal, get_args

from tools.file_kinds import read_or_problem
from tools.jsonl import json_lines

Label = Literal["ordinary", "failure", "unobservable", "progress"]
LABELS: tuple[str, ...] = get_args(Label)
MANIFEST_NAME = "manifest.jsonl"


class ManifestError(ValueError):
    """A manifest that cannot be read; the message names the file and the line."""


OPTIONAL_TYPES: dict[str, tuple[type, ...]] = {
    "pattern": (str,), "frames": (int,), "fps": (int, float), "seed": (int,), "task": (str,), "name": (str,),
    "variant": (str,), "width": (int,), "height": (int,), "suite_version": (int,)}
"""The optional fields' JSON types (a boolean is none of them; null is an absent field)."""

AT_LEAST_ONE = ("frames", "width", "height", "suite_version")
"""Optional whole-number fields that must be >= 1 when given."""


def check_row(row: object, where: str, labels: Iterable[str]) -> dict:
    """``row`` when it is a valid manifest row; else ManifestError naming ``where`` (file:line) and the field."""
    if not isinstance(row, dict):
        raise ManifestError(f"{where}: expected a JSON object, got {type(row).__name__}")
    for key in ("path", "instruction", "label"):
        if not isinstance(row.get(key), str) or not row[key].strip():
            raise ManifestError(f"{where}: field {key!r} must be a non-empty string, got {row.get(key)!r}")
    if "\0" in row["path"]:  # no file has such a name: resolving it raised a bare "embedded null byte"
        raise ManifestError(f"{where}: field 'path' holds a NUL character, so it names no file name ({row['path']!r})")
    if row["label"] not in (labels := tuple(labels)):
        raise ManifestError(f"{where}: label {row['label']!r} is not one of {', '.join(labels)}")
    for key, types in OPTIONAL_TYPES.items():
        value = row.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, types)):
            raise ManifestError(f"{where}: field {key!r} has the wrong type ({value!r})")
    for key in AT_LEAST_ONE:
        if row.get(key) is not None and row[key] < 1:
            raise ManifestError(f"{where}: {key} must be >= 1, got {row[key]}")
    if row.get("fps") is not None and not 0 < row["fps"] < math.inf:  # compared, not converted: a huge int overflowed
        raise ManifestError(f"{where}: fps must be a finite number > 0, got {row['fps']}")
    return row


def load_manifest(path: str | Path) -> list[dict]:
    """Rows of a manifest (a ``manifest.jsonl`` file or a folder holding one), ``path`` made absolute.

    Blank lines are skipped; any other malformed line raises :class:`ManifestError` naming the line, a path that
    cannot be resolved (a symlink loop) too.
    """
    return [row for _, row in manifest_lines(path)]


def manifest_lines(path: str | Path) -> list[tuple[str, dict]]:
    """`load_manifest`'s rows with their lines, ``("PATH:N", row)`` (`evals.reward_scorer` names both lines of a
    clip listed twice)."""
    p = Path(path)
    if p.is_dir():
        p = p / MANIFEST_NAME
    problem, data = read_or_problem(p, "manifest")  # one look: read whole, or what is there (a FIFO, a folder: named)
    if problem:
        raise ManifestError(problem)
    base = p.resolve().parent
    rows = []
    for where, row in json_lines(p, ManifestError, data=data):
        row = dict(check_row(row, where, LABELS))
        try:
            row["path"] = str((base / row["path"]).resolve())
        except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError before Python 3.13): a traceback
            raise ManifestError(f"{where}: field 'path' {row['path']!r} cannot be resolved ({exc})") from None
        rows.append((where, row))
    return rows
