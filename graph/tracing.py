"""Reading agent runs back from the checkpoint database (DESIGN.md §3 "Tracing").

Every run is checkpointed by LangGraph (SqliteSaver, `runs/traces.sqlite` by default) under
thread id = run id. The latest checkpoint of a thread holds the run's state values; the
append-only `steps` list (graph.state.StepRecord dicts) is the trace, `result` the RewardResult.

Decisions where the issue was silent:
- Opening the database (the savers, their serializer, read-only reading) is `graph.trace_savers`; its
  names are imported here too, where the commands and scripts have always taken them from.
- `list_runs` reads thread ids straight from the SqliteSaver's `checkpoints` table (one row per
  thread, newest first) and then loads only each thread's latest checkpoint; other savers fall back
  to `saver.list(None)`.
- A run whose graph stopped mid-way (crash, interrupt) is listed with status "incomplete"; what the nodes that
  finished in its last superstep wrote is merged into its values (`graph.pending_writes`). One whose process still
  runs it (a live claim, `graph.run_claims`; with durability "async" its steps are saved as they end) is "running":
  it read "incomplete", as a crashed run does.
- Run ids are matched exactly (no prefix lookup that could silently pick another run); when none
  matches, the error names the traced ids that start with the given text. A run claimed in the file
  (`graph.run_claims`) with no checkpoint yet is said to be running, or to have died unsaved: with durability
  "exit" its trace is written when it ends, and it read as a mistyped id.
- A run whose checkpoint cannot be decoded (a damaged page, a serializer another program or version wrote)
  is `UnreadableRunError` naming the run and the file, a StoreError, so the commands print one error line
  instead of a traceback; `list_runs` can pass over such runs (`unreadable`), so one damaged run does not
  hide all the others from `raa runs`.
- `graph.trace_text.describe_update` renders one `stream_mode="updates"` item for `raa score --stream`.
- `RunTrace.values` holds only the fields of `graph.state.AgentState`: a checkpoint's channel values also
  hold LangGraph's own channels (the barrier before a join, "join:observe+contract:assess", "__start__",
  "branch:to:..."), which are the graph's bookkeeping, not the run's state, and `raa trace --json` printed
  them. A key a later version no longer declares is dropped with them (the allow-list is the simple rule).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from pydantic import BaseModel

from graph.pending_writes import with_pending
from graph.run_claims import FOREIGN_CLAIM_MAX_AGE_S, claims
from graph.state import AgentState
from graph.stores import StoreError
from graph.trace_savers import (  # noqa: F401 - re-exported: callers open savers from graph.tracing
    ReadingSaver,
    ThreadedAsyncSaver,
    open_async_saver,
    open_saver,
    traces_serde,
)


def no_database(path: Path) -> str:
    """That no trace database is at `path`, and where it looked: `runs/traces.sqlite` (the default) is read
    from the current directory, so runs scored from another folder are not there. `:memory:` is no file to
    look for: the traces it held lived and ended in the process that scored them."""
    if str(path) == ":memory:":
        return ("no trace database at :memory: (traces kept in memory live only inside the process that scored "
                "them; set RAA_TRACES_PATH to a file to read runs afterwards, or --traces PATH reads another)")
    where = f" in {Path.cwd()}" if not path.is_absolute() else ""
    return (f"no trace database at {path} (no runs yet{where}; --traces PATH or RAA_TRACES_PATH reads "
            "another)")


class RunNotFoundError(LookupError):
    """No checkpoint exists for the requested run id."""


class UnreadableRunError(StoreError):
    """The run's checkpoint exists but cannot be decoded (see module docstring)."""


def _plain(value: Any) -> Any:
    """pydantic records -> dicts (JSON mode), containers recursively; other values unchanged."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@dataclass
class RunTrace:
    """One run read back from its latest checkpoint."""

    run_id: str
    """Thread id of the run."""
    updated: str
    """UTC ISO time of the latest checkpoint."""
    values: dict[str, Any]
    """State values (pydantic records converted to dicts)."""
    steps: list[dict[str, Any]] = field(default_factory=list)
    """StepRecords in execution order."""
    claim: tuple[str, str] | None = None
    """A run with a claim and no checkpoint (`graph.claimed_runs`): its status ("running" / "died") and why; or an
    unfinished run with checkpoints whose process still runs it ("running", not "incomplete")."""

    @property
    def result(self) -> dict[str, Any] | None:
        return self.values.get("result")

    @property
    def status(self) -> str:
        """The result's status, "incomplete" when the run never reached the gate (or `claim`'s status)."""
        if self.claim is not None:
            return self.claim[0]
        return str(self.result.get("status")) if self.result else "incomplete"

    @property
    def reward(self) -> float | None:
        return self.result.get("reward") if self.result else None

    @property
    def preset(self) -> str:
        """The run's preset (from its state, or its result when the state does not carry it)."""
        return str(self.values.get("preset") or (self.result or {}).get("preset") or "")

    @property
    def overrides(self) -> dict[str, Any]:
        """The overrides the run recorded (from its state, or its result); empty for the plain preset and for runs
        recorded before overrides were kept (older runs listed server settings here: `graph.trace_commands`)."""
        return dict(self.values.get("overrides") or (self.result or {}).get("overrides") or {})

    @property
    def reasons(self) -> list[str]:
        """The result's reasons: why it is zero or ineligible, or a scored run's requirement lines (empty for an
        incomplete run; a claimed run's: why it has no trace)."""
        if self.claim is not None:
            return [self.claim[1]]
        return [str(r) for r in (self.result or {}).get("reasons") or []]


STATE_FIELDS = frozenset(AgentState.__annotations__)
"""The channels of a checkpoint that are the run's state (any other is LangGraph's own)."""


def _trace_from_tuple(run_id: str, tup: Any) -> RunTrace:
    channels = tup.checkpoint.get("channel_values", {})
    values = _plain({name: value for name, value in channels.items() if name in STATE_FIELDS})
    # a run stopped mid-superstep: what its side-by-side nodes that finished wrote is still pending
    values = with_pending(values, ((task, channel, _plain(value)) for task, channel, value in tup.pending_writes or []))
    steps = list(values.get("steps") or [])
    return RunTrace(run_id=run_id, updated=str(tup.checkpoint.get("ts", "")), values=values, steps=steps)


def _unreadable(saver: BaseCheckpointSaver, run_id: str, exc: Exception) -> UnreadableRunError:
    where = saver.path if isinstance(saver, ReadingSaver) else type(saver).__name__
    return UnreadableRunError(f"run {run_id!r} in trace database {where} cannot be read ({type(exc).__name__}: "
                              f"{exc}): its checkpoint is damaged or was written by another program; "
                              "`raa prune --keep N` can delete it")


def read_trace(saver: BaseCheckpointSaver, run_id: str, claim_max_age_s: float = FOREIGN_CLAIM_MAX_AGE_S) -> RunTrace:
    """The latest checkpoint of `run_id`; RunNotFoundError when there is none (its message names up to
    five traced run ids that start with `run_id`, blanks around it left out: an id cut short or pasted with a
    newline; or says the run is in flight or died unsaved, `claim_max_age_s`: when another host's claim is
    stale, `graph.run_claims`)."""
    try:
        tup = saver.get_tuple({"configurable": {"thread_id": run_id, "checkpoint_ns": ""}})
        trace = None if tup is None else _trace_from_tuple(run_id, tup)
    except StoreError:  # the file itself cannot be read: not this run's fault
        raise
    except Exception as exc:  # the serializer's errors have no common type (ValueError, TypeError, ...)
        raise _unreadable(saver, run_id, exc) from exc
    if trace is None:
        if (held := _claim(saver, run_id, claim_max_age_s)) is not None:  # written when it ends (durability "exit"): none yet
            run = claimed_run(*held)
            what = "has no trace yet" if run.status == "running" else "died, no trace saved"
            raise RunNotFoundError(f"run {run_id!r} {what}: {run.reasons[0]} (RAA_TRACE_DURABILITY=async saves each "
                                   "step's checkpoint)")
        stripped = run_id.strip()  # pasted with blanks around it: name the run it is (never read it silently)
        near = [tid for tid in run_ids(saver) if tid.startswith(stripped)] if stripped else []
        hint = f"; did you mean {', '.join(near[:5])}{' ...' if len(near) > 5 else ''}?" if near else ""
        raise RunNotFoundError(f"no traced run with id {run_id!r}{hint}")
    if trace.result is None and (held := _claim(saver, run_id, claim_max_age_s)) is not None and held[1]:
        trace.claim = claim_text(True, held[2], saved=True)  # in flight with its steps saved so far: not a crash
    return trace


def _claim(saver: BaseCheckpointSaver, run_id: str, max_age_s: float) -> tuple[str, bool, str, str] | None:
    """The claim on `run_id` in a SQLite trace database (`graph.run_claims.claims`); None for other savers."""
    if not isinstance(saver, SqliteSaver):
        return None
    with saver.cursor(transaction=False) as cur:
        return next(iter(claims(cur.connection, max_age_s, run_id)), None)


CLAIM_STATUSES = ("running", "died")
"""The statuses of a claimed run with no checkpoint (`claimed_run`)."""


def claim_text(alive: bool, who: str, *, saved: bool = False) -> tuple[str, str]:
    """(status, why) of a claimed run that has not finished (`who`: its process, as `graph.run_claims.claims` names
    it): "running" (its process may still run; `saved`: some of its steps are already saved, durability "async") or
    "died" (no checkpoint, its process gone). The one writer of that text: `raa runs` lists it (`claimed_run`,
    `graph.claimed_runs`), `read_trace` says it."""
    if not alive:
        return CLAIM_STATUSES[1], f"{who}: its process ended before its trace was saved (a crash or a kill)"
    return CLAIM_STATUSES[0], f"{who}: " + ("still running; the steps so far are saved" if saved else
                                            "still running; its trace is written when it ends")


def claimed_run(run_id: str, alive: bool, who: str, claimed: str) -> RunTrace:
    """A run claimed in the trace database with no checkpoint (a claim as `graph.run_claims.claims` reads it), its
    status and why from `claim_text`."""
    return RunTrace(run_id=run_id, updated=claimed, values={}, claim=claim_text(alive, who))


def ever_finished(saver: BaseCheckpointSaver, run_id: str) -> bool:
    """Whether any checkpoint of `run_id` holds a result: a run whose latest checkpoint is a time-travel fork
    not resumed yet (`update_state`) reads as incomplete, though it finished before the fork."""
    return last_result(saver, run_id) is not None


def last_result(saver: BaseCheckpointSaver, run_id: str) -> dict[str, Any] | None:
    """The newest result any checkpoint of `run_id` holds (as a dict), or None (see `ever_finished`).
    UnreadableRunError when one of its checkpoints cannot be decoded (as `read_trace`)."""
    try:
        for tup in saver.list({"configurable": {"thread_id": run_id, "checkpoint_ns": ""}}):
            if (result := tup.checkpoint.get("channel_values", {}).get("result")) is not None:
                return _plain(result)
    except StoreError:  # the file itself cannot be read: not this run's fault
        raise
    except Exception as exc:  # an older checkpoint that cannot be decoded (the serializer's errors vary)
        raise _unreadable(saver, run_id, exc) from exc
    return None


def run_ids(saver: BaseCheckpointSaver) -> Iterable[str]:
    """Thread ids (run ids) of the traced runs, newest first."""
    if isinstance(saver, SqliteSaver):
        with saver.cursor(transaction=False) as cur:
            cur.execute("SELECT thread_id, MAX(checkpoint_id) AS last FROM checkpoints WHERE checkpoint_ns = '' "
                        "GROUP BY thread_id ORDER BY last DESC")
            return [str(row[0]) for row in cur.fetchall()]
    seen: dict[str, str] = {}
    for tup in saver.list(None):
        tid = str(tup.config["configurable"]["thread_id"])
        seen.setdefault(tid, str(tup.checkpoint.get("ts", "")))
    return sorted(seen, key=seen.__getitem__, reverse=True)


RUN_STATUSES = ("scored", "zero", "ineligible", "incomplete")
"""What `RunTrace.status` can be (a result's status, or "incomplete")."""


def list_runs(saver: BaseCheckpointSaver, limit: int | None = None, *, status: str | None = None,
              preset: str | None = None, unreadable: list[str] | None = None,
              claim_max_age_s: float = FOREIGN_CLAIM_MAX_AGE_S) -> list[RunTrace]:
    """Traced runs, newest first: at most `limit` of those whose status is `status` and whose preset is
    `preset` (each when given). Runs are read newest first until `limit` match, so finding rare ones
    reads more of the database. `unreadable`: a list that gets the ids of the runs passed over because
    their checkpoint cannot be decoded (None: `UnreadableRunError` is raised). `claim_max_age_s`: as for
    `read_trace` (a run with steps saved is "running" while its claim is live)."""
    if status is not None and status not in RUN_STATUSES + CLAIM_STATUSES:  # "running": in flight, steps saved
        raise ValueError(f"status must be one of {', '.join(RUN_STATUSES + CLAIM_STATUSES)}, got {status!r}")
    runs: list[RunTrace] = []
    for tid in run_ids(saver):
        if limit is not None and len(runs) >= limit:
            break
        try:
            run = read_trace(saver, tid, claim_max_age_s)
        except UnreadableRunError:
            if unreadable is None:
                raise
            unreadable.append(tid)
            continue
        if (status is None or run.status == status) and (preset is None or run.preset == preset):
            runs.append(run)
    return runs
