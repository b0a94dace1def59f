"""The words of a batch worker's death (`graph.batch_procs`): the ineligible row of a clip whose worker died on each
of its attempts (`death_fault`) and the error of a batch left with no worker (`no_worker_left`); each death's cause
is cut at `CAUSE_CHARS` and at most `MAX_CAUSES` are named, so a long error text cannot swell a row."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from graph.schemas import Fault

CAUSE_CHARS = 200
"""At most this many characters of one death's cause in an ineligible row's reason (a worker's error may be long)."""
MAX_CAUSES = 4
"""At most this many deaths' causes are named in an ineligible row's reason (the rest are counted)."""


def exit_text(code: int | None) -> str:
    """Human wording of a process exit code (negative = killed by that signal)."""
    if code is None:
        return "no exit status"
    return f"signal {-code}" if code < 0 else f"exit code {code}"


HUNG = "did not finish within"
"""How the cause of a run killed for its time limit begins."""


def cause_text(text: str) -> str:
    """One death's cause, cut at `CAUSE_CHARS`."""
    return text if len(text) <= CAUSE_CHARS else text[:CAUSE_CHARS - 3] + "..."


def death_fault(causes: list[str]) -> Fault:
    """The fault of the ineligible row of an item whose worker died on each of its attempts (`_Job.causes`, in
    order; `graph.batch_procs`' docstring), its message the one cause when all were the same, else each attempt's.
    Stage "batch", kind "timeout" when every attempt ran past the run time limit, else "internal" (a worker died):
    an outage (`Fault.outage`), as `raa score-batch --retry-ineligible` treats it, not the agent's verdict on the
    clip. The row had a reason and no fault, so `evals.compare` and `evals.draws` counted it as the agent's own."""
    from graph.schemas import Fault  # deferred: pydantic models are not needed to word a batch's error

    last = "the last with no other run in flight"
    kind = "timeout" if all(cause.startswith(HUNG) for cause in causes) else "internal"
    if len(set(causes)) == 1:
        what = ("this clip's run " if causes[0].startswith(HUNG) else "the worker process scoring this clip ")
        return Fault(stage="batch", kind=kind,
                     message=f"{what}{cause_text(causes[0])} on each of {len(causes)} attempts, {last}")
    shown = "; ".join(f"attempt {i}: {cause_text(cause)}" for i, cause in enumerate(causes[:MAX_CAUSES], 1))
    more = f"; {len(causes) - MAX_CAUSES} more" if len(causes) > MAX_CAUSES else ""
    return Fault(stage="batch", kind=kind, message=f"the worker process scoring this clip ended on each of "
                                                   f"{len(causes)} attempts, {last}: {shown}{more}")


def no_worker_left(startup_errors: list[str], last_death: str, spawned: int) -> str:
    """The message of the BatchError of a batch left with work and no worker: the start failures when no worker
    became ready, else the last death of one that had (`last_death`; replacements are capped: `graph.batch_procs`'
    docstring) and how many failed to start, if any. Deaths of workers with no run in flight use up replacements too (they blame no
    clip), and such a batch stopped saying only "no batch worker process could start: "."""
    if not last_death:
        return "no batch worker process could start: " + "; ".join(dict.fromkeys(startup_errors))
    failed = (f"; {len(startup_errors)} failed to start, the last: {cause_text(startup_errors[-1])}" if startup_errors
              else "")
    return (f"no batch worker process is left and no more may start ({spawned} worker process(es) started in all): "
            f"the last that had started {last_death}{failed}")
