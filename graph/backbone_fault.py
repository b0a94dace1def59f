"""The fault of a backbone call (graph.backbone, graph.tool_rounds; DESIGN.md §3 "Faults"): what could not be
recovered, by stage and kind. It lives apart so the structured calls and the tool rounds share it; callers import
it from graph.backbone, its public home.
"""

from __future__ import annotations

from typing import Literal

FaultKind = Literal["transport", "timeout", "invalid_reply", "empty_reply", "refused", "settings"]


class BackboneFault(Exception):
    """A backbone call that could not produce a valid output after bounded retries."""

    def __init__(self, stage: str, kind: FaultKind, message: str) -> None:
        super().__init__(f"[{stage}] {kind}: {message}")
        self.stage = stage
        self.kind: FaultKind = kind
        self.message = message
