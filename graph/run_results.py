"""The results of agent runs that did not end at the gate, and of one whose trace was not saved (graph/api.py runs
the agent and says when each applies, in its module docstring).

Each is an ineligible RewardResult (reward None) with its reason and, where it has one, the Fault behind it, so a
batch groups and retries it by that fault and `RewardResult.outage` reads it; nothing here makes up a reward.
`unsaved_trace` keeps the gate's own result and only adds why `raa trace` will not find it.
"""

from __future__ import annotations

from collections.abc import Sequence

from graph.schemas import Fault, RewardResult

UNSAVED_TRACE = "trace: the run's trace was not saved"
"""How the note of a result whose trace could not be saved begins (`unsaved_trace`)."""


def ineligible_result(preset: str, reason: str, run_id: str = "", faults: Sequence[Fault] = ()) -> RewardResult:
    """An ineligible RewardResult (reward None) carrying `reason` and the `faults` behind it, if any: for runs
    that could not produce a result (and, in `raa score-batch`, for items that never ran)."""
    return RewardResult(status="ineligible", reward=None, reasons=[reason], run_id=run_id, preset=preset,
                        faults=list(faults))


def fault_result(preset: str, fault: Fault, run_id: str = "") -> RewardResult:
    """The ineligible result of one `fault` of the call itself, its reason the fault's ("stage: kind: message") as
    the gate writes every other: a reason of its own (the bare message, "agent: message") read differently from
    the fault a batch groups and retries it by."""
    return ineligible_result(preset, fault.reason(), run_id, [fault])


def machinery_failed(preset: str, what: str, run_id: str = "") -> RewardResult:
    """An ineligible result because the agent's own machinery failed (`what`: an error escaping the graph, a trace
    database it cannot write), not the clip: an "internal" fault of stage "agent" (reason "agent: internal: `what`"),
    which `RewardResult.outage` reads as an outage (the trainer's ``ineligible_error``, not the agent's verdict)."""
    return fault_result(preset, Fault(stage="agent", kind="internal", message=what), run_id)  # escaped, cut by Fault


def run_id_taken(preset: str, message: str) -> RewardResult:
    """The result of a call that ran nothing because its run id is taken (`message` says by what and ends "use a
    new run id"): a "settings" fault of stage "agent", the call's own setting, so an outage (`RewardResult.outage`:
    the same clip under a new id is scored; `raa score-batch` gives each run a new id, so its --retry-ineligible
    does), never the agent's verdict on the clip (graph.api's module docstring). No run id: the id names another
    run's trace."""
    return fault_result(preset, Fault(stage="agent", kind="settings", message=message))


def refused_running(preset: str, run_id: str, process: str | None) -> RewardResult:
    """The result of a call refused because another run holds `run_id`: a run in this process (`process` None)
    or in `process` ("process N on HOST (since T)", `graph.run_claims.claim`). No run, no trace, no run id of
    its own (graph.api's module docstring)."""
    where, holder = ("", "another run in this process") if process is None else (f" in {process}", "that run")
    return run_id_taken(preset, f"run id {run_id!r} is already running{where}: this call was refused and ran "
                        f"nothing; {holder} holds it (that run's trace is {run_id!r}, this call has none); "
                        "use a new run id")


def unsaved_trace(result: RewardResult, exc: Exception, database: str, run_id: str) -> RewardResult:
    """`result` (the gate's own) with a last reason and note saying that its trace was not saved: the error and
    the trace `database` (a file, or the checkpointer's type), so that `raa trace` not finding it is explained."""
    note = (f"{UNSAVED_TRACE} in {database} ({type(exc).__name__}: {exc}); the result stands, but "
            f"`raa trace {run_id}` will not find it")
    return result.model_copy(update={"reasons": [*result.reasons, note], "notes": [*result.notes, note],
                                     "trace_saved": False})


def trace_saved(result: RewardResult) -> bool:
    """False for a result whose trace could not be saved (`unsaved_trace`): its `trace_saved` field."""
    return result.trace_saved
