"""The calls a test counts on one path: `os.open` or `os.stat` given that path, recorded as they pass through (a reader
that opens or looks at a file twice where once will do); and a path removed just after a reader's first look at it
(`removed_after_first_look`: a reader that looks twice sees two answers)."""

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


def removed_after_first_look(monkeypatch: Any, path: Path, looks: int = 1) -> list[str]:
    """A list of the calls (``"open"``, ``"stat"``) given `path` that answered, from now until ``monkeypatch.undo()``;
    `path` is removed just after the first of them returns (after the `looks`-th: a reader whose first look only asks
    whether `path` is a folder)."""
    seen: list[str] = []

    def then_removed(call: Literal["open", "stat"]) -> Any:
        def look(target: Any, *args: Any, **kwargs: Any) -> Any:
            answer = _REAL[call](target, *args, **kwargs)
            if os.fspath(target) == str(path):
                seen.append(call)
                if len(seen) == looks:
                    path.unlink()
            return answer
        return look

    for call in ("open", "stat"):
        monkeypatch.setattr(os, call, then_removed(call))
    return seen


def reopen_refused(monkeypatch: Any) -> None:
    """`os.open` refuses the reopen of a regular file for reading through ``/proc/self/fd`` (`tools.file_kinds._opened`)
    with EACCES, as for a file the user may not read (the tests run as root, who reads every file), from now until
    ``monkeypatch.undo()``."""
    from tools import file_kinds

    real = os.open

    def refuse(target: Any, *args: Any, **kwargs: Any) -> Any:
        if os.fspath(target).startswith(file_kinds.PROC_FD + "/"):
            raise PermissionError(13, "Permission denied", os.fspath(target))
        return real(target, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
