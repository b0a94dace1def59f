"""Reading JSONL files. Strictly (`json_lines`): every non-blank line must be JSON, and a line that is not
names its place (`PATH:N`). Shared by the readers that refuse a broken file rather than skip its lines
(`training.data.load_prompts`, `evals.compare.read_results`, `evals.vqa.load_vqa_manifest`).
`evals.clipsuite.load_manifest` keeps its own loop: its errors say "PATH line N", which its tests and
users' scripts read. A UTF-8 byte-order mark at the start of a file (Windows editors, PowerShell) is skipped. Leniently (`json_objects`), for a log another process may be appending to:
lines that are not JSON objects are skipped and counted (`training.best`, `training.report`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def json_lines(path: Path, error: Callable[[str], Exception]) -> Iterator[tuple[str, Any]]:
    """`("PATH:N", value)` for each non-blank line of `path`; `error("PATH:N: not valid JSON (...)")` is
    raised for a line that does not parse."""
    for number, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{where}: not valid JSON ({exc.msg})") from None
        yield where, value


def json_objects(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The JSON objects of `path`'s lines and how many non-blank lines were not one (a line being
    written, a torn file); ([], 0) without the file."""
    if not path.is_file():
        return [], 0
    rows: list[dict[str, Any]] = []
    skipped = 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        if isinstance(row, dict):
            rows.append(row)
        elif line.strip():
            skipped += 1
    return rows, skipped
