"""How a number read from an RAA_* variable must be written (shared by `tools.settings` and `graph.settings`;
no heavy imports, so the light commands that read settings stay light)."""

from __future__ import annotations

import re

_PLAIN_INT = re.compile(r"[+-]?[0-9]+")


def number_text_error(raw: str, kind: type[int] | type[float]) -> str | None:
    """Why the stripped setting text ``raw`` is not a plainly written ``kind``, or None. int() and float() (and
    pydantic's lax parsing) accept "1_0" as 10 and "١٠" (Arabic-Indic digits) as 10, and pydantic "10.0" as the
    int 10: a typo ("1_0" for "10" or "1.0") was taken silently. An integer is ASCII digits with an optional
    sign; no number has underscores or non-ASCII characters (1e3, inf and nan reach the fields' own checks)."""
    if kind is int and not _PLAIN_INT.fullmatch(raw):
        return "is not a plain whole number: write ASCII digits only (e.g. 1000; no underscores, no decimal point)"
    if "_" in raw or not raw.isascii():
        return "is not a plainly written number: no underscores or non-ASCII digits (e.g. 120 or 0.5)"
    return None
