"""Extra evidence tools: a researcher's own evaluators, consulted by the reward agent (paper Sec. 3.2,
"Extend the Evidence Tools").

An `EvidenceTool` is any object with a `name` and `evaluate(frames, instruction) -> EvidenceReport`: a
task-specific classifier, another reward model, a rule-based check on the frames. They are passed
explicitly, `AgentTools(extra=[GraspCheck(), ...])`; there is no discovery and no registry.

How the agent uses them (`graph/nodes/extra.py`, `graph/nodes/reflect.py`):
- Each tool runs once per clip, in a worker thread, from the end of the quality check beside the model
  calls up to reflect (graph.nodes.extra), on the clip's decoded RGB frames (uint8 [T, H, W, 3]; the first 512 frames of longer clips) and the
  instruction (as the run uses it: stripped, truncated like every stage sees it).
- reflect shows every report (tool name, summary, named values and up to 4 of the frames it points
  to) as supporting evidence, which the model must check against the contract and the frames before
  it changes a judgment. Reports never enter the reward formula: R is still computed from the
  structured judgments by fixed code.
- A tool that raises, or returns something other than an EvidenceReport (or a dict that validates as
  one), makes the run ineligible with the reason: a failed tool is a fault, never silently skipped.
- Presets without reflect (`direct`, `structured`, `decomposed`, `task_blind`) do not run them.

Decisions where the paper was silent: a report's frame indices outside the clip are dropped (and the
trace says how many); frame indices are integers (`tools.sampling.FrameIndex`: a boolean or a string is
refused, as is a NaN or infinite value, which reached the prompt as "nan": the report is invalid, so the
run is ineligible with that reason); tool names are short identifiers (letters, digits, `_`, `-`, `.`; at most 40)
and unique within an agent, so traces and prompts can name them. A tool without a callable
`evaluate` is refused when the agent is built (it made every run ineligible as an "internal" fault,
the AttributeError raised outside the tool's own fault handling).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Protocol

import numpy as np
from pydantic import BaseModel, Field, FiniteFloat

from tools.identity import object_identity
from tools.sampling import FrameIndex

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")
EXTRA_SHORT_SIDE = 448
"""Short side (pixels) of the frames the agent hands your evidence tools (``ToolSettings.extra_short_side``):
enough for the usual 224-448 pixel classifiers; 512 full-size frames of a 1080p clip are 3.2 GB."""


class EvidenceReport(BaseModel):
    """What one extra evidence tool found in one clip."""

    summary: str = Field(min_length=1, max_length=2000,
                         description="The finding in words, as the model should read it.")
    frames: list[FrameIndex] = Field(default_factory=list, max_length=64,
                              description="Frame indices the finding refers to (up to 4 are shown as images).")
    values: dict[str, FiniteFloat] = Field(default_factory=dict, max_length=32,
                                           description="Named finite numbers (shown as text; never part of "
                                                       "the reward).")


class EvidenceTool(Protocol):
    """A custom evaluator the agent consults (see module docstring)."""

    name: str
    """Short identifier shown to the model and in traces."""

    def evaluate(self, frames: np.ndarray, instruction: str) -> EvidenceReport:
        """Evaluate one clip: frames uint8 [T, H, W, 3] from frame 0, and the task instruction."""
        ...


def extra_tool_identity(tool: EvidenceTool) -> str:
    """Which tool it is, as the frame cache's extra-tool job key holds it (`graph.nodes.extra`): its name, type
    and the object (`tools.identity.object_identity`): a tool's report depends on whatever the object holds, so no two
    objects share, nor a later one at a collected one's address."""
    return f"{tool.name} {object_identity(tool)}"


def check_extra_tools(tools: Iterable[EvidenceTool]) -> tuple[EvidenceTool, ...]:
    """The tools as a tuple; raises TypeError / ValueError for a missing, malformed or repeated name, or a
    missing `evaluate` (found when the agent is built, not as an internal fault of every run)."""
    out = tuple(tools)
    seen: set[str] = set()
    for tool in out:
        try:
            name = tool.name
        except AttributeError:
            raise TypeError(f"extra evidence tool {type(tool).__name__} has no `name` attribute") from None
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"extra evidence tool name {name!r} must be 1-40 letters, digits, '_', '-' or '.'")
        if not callable(getattr(tool, "evaluate", None)):
            raise TypeError(f"extra evidence tool {name!r} ({type(tool).__name__}) has no callable `evaluate`")
        if name in seen:
            raise ValueError(f"two extra evidence tools are named {name!r}; names must be unique")
        seen.add(name)
    return out
