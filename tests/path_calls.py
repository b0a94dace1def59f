"""The calls a test counts on one path: `os.open` or `os.stat` given that path, recorded as they pass through (a reader
that opens or looks at a file twice where once will do)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

_REAL = {"open": os.open, "stat": os.stat}


def calls_on(monkeypatch: Any, call: Literal["open", "stat"], path: Path) -> list[Any]:
    """A list that `os.<call>` appends its first argument to whenever it is given `path`, from now until
    ``monkeypatch.undo()``; the real call answers every call."""
    seen: list[Any] = []
    real = _REAL[call]

    def counting(target: Any, *args: Any, **kwargs: Any) -> Any:
        if os.fspath(target) == str(path):
            seen.append(target)
        return real(target, *args, **kwargs)

    monkeypatch.setattr(os, call, counting)
    return seen
