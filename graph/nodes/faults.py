"""The exceptions a stage raises for a clip it cannot evaluate or a run it cannot do, and the `Fault` record of any
exception raised inside a stage (`to_fault`, which `graph.nodes.common.make_node` records; DESIGN.md §3 "Faults").
They live apart from the step wrapper so that each kind's rule is in one place; `graph.nodes.common` re-exports them.

Decided where the issue was silent: a new input on a thread that already holds a run (`RunIdTaken`, refused by the
quality node for the calls that reach the graph unchecked: a reused Studio thread) is a "settings" fault, as
`graph.run_results.run_id_taken` makes a taken run id's: the call's own setting, not the clip (the same clip under a new id
is scored), so an outage (`RewardResult.outage`) that `raa score-batch --retry-ineligible` retries. It was an
"input" fault here: the clip's own ⊥ in the trainer's count, and final for a resume.

So is a refused `RunContext` (`ContextRefused`: its config, or the extra tools it wires, is not the agent's build's):
the caller's setting or wiring, never the clip (the same clip under the build's context is scored), so a "settings"
fault of stage "context". It was an `InputFault`, kind "input": counted as the clip's ⊥ and never retried by
`--retry-ineligible` once the caller was fixed.
"""

from __future__ import annotations

from graph.backbone import BackboneFault
from graph.schemas import Fault
from graph.state_records import StateRecordError
from tools.errors import ToolFault


class InputFault(ValueError):
    """The run's input (instruction or video reference) cannot be evaluated."""


class ContextRefused(Exception):
    """The invocation's `RunContext` carries another config, or other extra tools, than the agent's build
    (`graph.nodes.common`'s module docstring): the caller's setting, not the clip (module docstring)."""


class EndpointMissing(Exception):
    """The context's backbone has no model (`graph.no_endpoint.NoEndpointModel`); the message says why."""


class EvidenceFailed(Exception):
    """Evidence work the run does in the background for stage `stage` (surprise scores, extra tools;
    graph.nodes.background) failed with `error`; recorded as a fault of `stage`, not of the node that found it."""

    def __init__(self, stage: str, error: BaseException) -> None:
        super().__init__(f"{stage}: {error}")
        self.stage, self.error = stage, error


class RunIdTaken(Exception):
    """This run's thread (its run id) already holds a run: the call's own setting, not the clip (module docstring)."""


def to_fault(stage: str, exc: BaseException) -> Fault:
    """A Fault record for an exception raised inside `stage`."""
    from tools.video import FrameIndexError, VideoError

    if isinstance(exc, EvidenceFailed):  # background evidence (surprise, extra tools): its own stage
        return to_fault(exc.stage, exc.error)
    if isinstance(exc, ContextRefused):
        return Fault(stage="context", kind="settings", message=str(exc)[:2000])
    if isinstance(exc, EndpointMissing):
        return Fault(stage="backbone", kind="settings", message=str(exc)[:2000])
    if isinstance(exc, RunIdTaken):
        return Fault(stage=stage, kind="settings", message=str(exc)[:2000])
    if isinstance(exc, InputFault | StateRecordError):
        return Fault(stage=stage, kind="input", message=str(exc)[:2000])
    if isinstance(exc, BackboneFault):
        return Fault(stage=stage, kind=exc.kind, message=exc.message[:2000])
    if isinstance(exc, ToolFault):
        return Fault(stage=stage, kind="tool", message=f"{exc.tool} {exc.kind}: {exc.message}"[:2000])
    if isinstance(exc, VideoError) and not isinstance(exc, FrameIndexError):  # an index asked for is the agent's
        return Fault(stage=stage, kind="video", message=f"{type(exc).__name__}: {exc}"[:2000])
    return Fault(stage=stage, kind="internal", message=f"{type(exc).__name__}: {exc}"[:2000])
