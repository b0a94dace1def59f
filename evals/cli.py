"""CLI commands for the clip suite (placeholder until the clip suite lands)."""

from __future__ import annotations

from pathlib import Path


def make_clips_command(out: Path, seed: int = 0, preset: str = "small") -> None:
    raise NotImplementedError("clip suite not implemented yet")
