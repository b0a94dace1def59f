"""A disk that fills up half-way, for tests of writes that must leave the previous file whole."""

from __future__ import annotations

from pathlib import Path


def half_then_full_disk(self: Path, text: str, *args, **kwargs) -> int:
    """Path.write_text on a disk that fills up half-way: half the text is written, then ENOSPC."""
    with self.open("w", encoding="utf-8") as fh:
        fh.write(text[: len(text) // 2])
    raise OSError(28, "No space left on device")
