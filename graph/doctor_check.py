"""One line of `raa doctor` (graph/doctor.py): a part's name, its status and what to change."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

CheckStatus = Literal["ok", "warning", "problem", "skipped"]
"""ok; warning (works, probably not as meant); problem (a run would be ineligible or fail); skipped."""


@dataclass(frozen=True)
class Check:
    """The outcome of one check."""

    name: str
    status: CheckStatus
    detail: str
