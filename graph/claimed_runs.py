"""Runs claimed in a trace database with no checkpoint there, for `raa runs` (graph/trace_commands.py).

With durability "exit" (the default) a run writes its trace only when it ends: a run in flight, or one whose
process was killed mid-way, has a claim (`graph.run_claims`) and no checkpoint. `raa runs` did not list them (only
`raa trace RUN_ID` explained them), so a researcher watching a batch saw neither what was running nor what had died.

Decisions where the issue was silent:
- They are `RunTrace`s with no values, `claim` set: status "running" (its process may still be running,
  `graph.run_claims._alive`) or "died", and why there is no trace as the reason (`graph.tracing.claimed_run`,
  which `raa trace` says too); `raa runs` lists them among the traced runs by the time of their claim (a run that died long ago does not sit above every newer run).
- A run with a checkpoint is listed from it, claim or not (a crash under durability "async" leaves both).
- `--preset` passes over them (no checkpoint says which preset they run); `--status running` / `died` keeps only
  them.
"""

from __future__ import annotations

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver

from graph.run_claims import FOREIGN_CLAIM_MAX_AGE_S, claims
from graph.tracing import CLAIM_STATUSES, RunTrace, claimed_run, run_ids


def unsaved_runs(saver: BaseCheckpointSaver, status: str | None = None,
                 claim_max_age_s: float = FOREIGN_CLAIM_MAX_AGE_S) -> list[RunTrace]:
    """The runs claimed in `saver`'s SQLite file with no checkpoint, newest first (only those with `status` when
    given); empty for other savers. `claim_max_age_s`: when another host's claim is stale (`graph.run_claims`)."""
    if not isinstance(saver, SqliteSaver) or status not in (None, *CLAIM_STATUSES):
        return []
    with saver.cursor(transaction=False) as cur:
        found = claims(cur.connection, claim_max_age_s)
    traced = set(run_ids(saver)) if found else set()
    runs = [claimed_run(*claim) for claim in found if claim[0] not in traced]
    return [run for run in runs if status in (None, run.status)]
