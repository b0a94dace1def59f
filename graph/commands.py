"""Agent CLI commands (placeholder until the reward agent lands)."""

from __future__ import annotations

from pathlib import Path


def score_command(video: Path, instruction: str = "") -> None:
    raise NotImplementedError


def score_batch_command(manifest: Path, out: Path = Path("results.jsonl")) -> None:
    raise NotImplementedError


def runs_command() -> None:
    raise NotImplementedError


def trace_command(run_id: str) -> None:
    raise NotImplementedError
