"""The agent's SQLite files (trace checkpoints, stage cache): a file that cannot be used is a
`StoreError` naming it, raised where the file is opened, before any run starts.

Decision where the issues were silent: a trace database or stage cache that is not a SQLite file,
sits under a path that is not a folder, or cannot be created is a usage error of the command (the CLI
prints the message and exits 2), not a traceback and not an ineligible run per clip: no run could
record its trace or reuse a stage output there, and the fix is the same for all of them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class StoreError(RuntimeError):
    """A trace database or stage cache that cannot be created or opened."""


@contextmanager
def store_errors(path: str | Path, what: str, setting: str) -> Iterator[None]:
    """Turn SQLite and file-system errors raised while opening `path` into a `StoreError` that names
    the file (`what`: "trace database" / "stage cache") and the setting that chooses it."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        raise StoreError(f"{what} {path} cannot be used ({type(exc).__name__}: {exc}); move or delete "
                         f"it, or choose another path ({setting})") from exc


def ensure_parent(path: str | Path) -> None:
    """Create the folder of `path` (nothing for SQLite's ":memory:")."""
    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
