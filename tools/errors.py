"""Typed errors shared by the evidence tools.

`ToolFault` is raised when a configured evidence tool (motion tracker, surprise scorer, tool
service) cannot load or run. The reward agent turns it into a `Fault` record and an
ineligible result: there is never a silent switch to another backend, and never a model-only
fallback.
"""

from __future__ import annotations


class ToolFault(RuntimeError):
    """A required evidence tool failed to load or run.

    Attributes:
        tool: short tool name ("motion", "surprise", "quality", "service").
        kind: failure kind ("load", "run", "transport", "input").
    """

    def __init__(self, tool: str, kind: str, message: str) -> None:
        super().__init__(f"{tool} tool {kind} failure: {message}")
        self.tool = tool
        self.kind = kind
        self.message = message
