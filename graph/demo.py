"""`raa demo` (placeholder; the lead fills it)."""

from __future__ import annotations

from pathlib import Path


def demo_command(out: Path = Path("demo_out")) -> None:
    raise NotImplementedError
