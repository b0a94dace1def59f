"""Strict reading of a JSONL file: every non-blank line must be JSON, and a line that is not names its
place (`PATH:N`). Shared by the readers that refuse a broken file rather than skip its lines
(`training.data.load_prompts`, `evals.compare.read_results`, `evals.vqa.load_vqa_manifest`).
`evals.clipsuite.load_manifest` keeps its own loop: its errors say "PATH line N", which its tests and
users' scripts read."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def json_lines(path: Path, error: Callable[[str], Exception]) -> Iterator[tuple[str, Any]]:
    """`("PATH:N", value)` for each non-blank line of `path`; `error("PATH:N: not valid JSON (...)")` is
    raised for a line that does not parse."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{where}: not valid JSON ({exc.msg})") from None
        yield where, value
