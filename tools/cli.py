"""CLI command for the tool service (placeholder until the tool service lands)."""

from __future__ import annotations


def serve_tools_command(host: str = "127.0.0.1", port: int = 8765) -> None:
    raise NotImplementedError("tool service not implemented yet")
