"""The run-id claim around every run of the compiled agent (`graph.thread_guard.RewardAgent`; `graph.run_claims`).

A run started on the agent itself (`agent.invoke`, `ainvoke`, `stream`, `astream`: a notebook, a script, the
compiled graph handed to other code) wrote no claim: only `graph.api.arun_agent` (`score_video`, `ascore_videos`,
`raa score`) claimed its run id. Killed mid-way with durability "exit" (no checkpoint yet) such a run was "no traced
run" to `raa trace` and missing from `raa runs`, where an API run of the same kind read "died"; in flight it was not
spared by `raa prune`, and a second process could run its thread id at once. The claim now lives where every run
passes: the agent's `stream` / `astream` (which `invoke` / `ainvoke` run through) claim the run's thread id before
anything is written and release it once the run has ended (its checkpoint written), and `arun_agent` no longer
claims on its own (the API's results for a refused or failed claim are as before, from the errors below).

Decisions where the issue was silent:
- Not in a node (the quality node, say): a node cannot release the claim after the run's last checkpoint is written
  (after the gate, outside any node), so the run would read "died" or "no traced run" between the two; and a node
  runs after LangGraph has checkpointed the input, so a refused run would already have written onto the thread.
- Claimed: a run on a thread id with a SQLite checkpointer on a file, the agent's own or one lent in the call's
  config (`graph.thread_guard`; `graph.run_claims.sqlite_file`): a run from an input, the calls `graph.thread_guard`
  checks, and also a resume (input None) or a `Command`, which continues a run (a resume after an interrupt, a fork
  from Python) and so is not refused for the run its thread holds; it claimed nothing, and such a run read
  "incomplete" while it ran (`raa prune --status incomplete` did not spare it) and could be resumed by a second
  process at once. A claim held by another live process refuses it as it refuses a new input. In-memory and other
  checkpointers are private to their process (as before).
- A claim held by a live process is `RunIdClaimed` (a ValueError, as `ThreadInUseError`), raised before the run
  writes anything; a claim that cannot be written (a locked or read-only file, a `raa prune --vacuum` in progress)
  is `RunClaimFailed` naming the error. The claim is taken before the thread's look-up (`graph.thread_guard`), so
  the look-up sees any run of the id another process finished meanwhile. The API's own look-up comes before the
  claim: a thread that holds checkpoints and a live claim is a run in flight, which it names (`live_holder`).
- The age after which another host's claim is stale (`graph.run_claims`) comes from the run's config,
  `configurable[CLAIM_AGE_KEY]`: `build_reward_agent` binds the settings' value
  (`BackboneSettings.foreign_claim_max_age_s`) when it has settings, `arun_agent` passes one only when given one
  (its callers' settings), so a ready agent's stands; else the default.
  A key beginning "__" is never copied into checkpoint metadata by LangGraph.
- A run that ends normally releases its claim at once (a failure leaves a claim that is taken over once the process
  has ended), in a worker thread listed as pending (`graph.claim_releases`) that the run waits for: a Ctrl-C of a sync
  run, or a cancellation of an async one, while the release waits on another process's write lock leaves it going
  on (in the calling thread a Ctrl-C rolled it back, and the claim stayed for the process's life). One that ends
  with an error (its final trace write failed, most likely on another process's write lock, which the release would
  meet again), is cancelled or is closed early releases it in a daemon thread (`graph.run_claims.release_later`) so
  the error comes back without waiting on that lock.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig

from graph import run_claims

CLAIM_AGE_KEY = "__raa_claim_max_age_s"
"""The config key (`configurable`) of the age after which another host's claim is stale (module docstring)."""


class RunIdClaimed(ValueError):
    """The run's thread id is claimed by a live process (`holder`: "process N on HOST (since T)")."""

    def __init__(self, run_id: str, holder: str) -> None:
        super().__init__(f"run id {run_id!r} is already running in {holder}: this run was refused and wrote nothing")
        self.run_id, self.holder = run_id, holder


class RunClaimFailed(RuntimeError):
    """The run's thread id could not be claimed in the trace database (the message names the error)."""


def _claim_of(config: RunnableConfig) -> tuple[str, float]:
    """(run id, claim age) of a run's config (module docstring)."""
    return str(config["configurable"]["thread_id"]), _claim_age(config)


def _claim_age(config: RunnableConfig) -> float:
    return float((config.get("configurable") or {}).get(CLAIM_AGE_KEY, run_claims.FOREIGN_CLAIM_MAX_AGE_S))


@contextmanager
def _claim_errors(run_id: str) -> Iterator[None]:
    """A failure to look up the trace file or write the claim in it as `RunClaimFailed` naming the error: the trace
    database cannot be written, so the run could not record its trace."""
    try:
        yield
    except Exception as exc:
        raise RunClaimFailed(f"run id {run_id!r} could not be claimed in the trace database "
                             f"({type(exc).__name__}: {exc})") from exc


@contextmanager
def _held(file: str | None, run_id: str, holder: str | None) -> Iterator[None]:
    """The run's body under the claim its call answered (`holder`: who holds `run_id` in `file`, None when claimed):
    nothing claimed without a file; refused (`RunIdClaimed`) under a live holder; released in a daemon thread when
    the body ends with an error, is cancelled or closed early (module docstring). After a body that ended, the caller
    releases it (its sync or async `release`)."""
    if file is None:
        yield
        return
    if holder is not None:
        raise RunIdClaimed(run_id, holder)
    try:
        yield
    except BaseException:
        run_claims.release_later(file, run_id)
        raise


@contextmanager
def claimed(checkpointer: Any, config: RunnableConfig) -> Iterator[None]:
    """Hold the claim of the run of `config` (with a thread id) in `checkpointer`'s file while the body runs."""
    run_id, max_age_s = _claim_of(config)
    with _claim_errors(run_id):
        file = run_claims.sqlite_file(checkpointer)
        holder = None if file is None else run_claims.claim_blocking(file, run_id, max_age_s)
    with _held(file, run_id, holder):
        yield
    if file is not None:
        run_claims.release_blocking(file, run_id)


@asynccontextmanager
async def aclaimed(checkpointer: Any, config: RunnableConfig) -> AsyncIterator[None]:
    """`claimed` for async runs: the claim's writes run in worker threads; a run cancelled while its claim is
    written holds none afterwards (`graph.run_claims.claim`)."""
    run_id, max_age_s = _claim_of(config)
    with _claim_errors(run_id):
        file = await run_claims.database_file(checkpointer)
        holder = None if file is None else await run_claims.claim(file, run_id, max_age_s)
    with _held(file, run_id, holder):
        yield
    if file is not None:
        await run_claims.release(file, run_id)


async def live_holder(checkpointer: Any, run_id: str, config: RunnableConfig) -> str | None:
    """Who holds a live claim of `run_id` in `checkpointer`'s file ("process N on HOST (since T)",
    `graph.run_claims.claim_of`; another host's stale by the claim age of `config`), or None: the API names it when
    the id's thread already holds checkpoints (a run in flight with its steps saved is not an earlier run). A
    release of the id this process has pending (a run that just failed) is waited for, as a claim waits for it."""
    max_age_s = _claim_age(config)
    if (file := await run_claims.database_file(checkpointer)) is None:
        return None

    def read() -> str | None:
        run_claims.join_releases(run_claims.WAIT_S, (file, run_id))  # a release of this process's pending: not live
        try:
            conn = sqlite3.connect(file, timeout=run_claims.WAIT_S)
            try:
                held = run_claims.claim_of(conn, run_id, max_age_s)
            finally:
                conn.close()
        except sqlite3.Error:  # only names the holder: the thread holds checkpoints either way
            return None
        return held[1] if held is not None and held[0] else None

    return await asyncio.to_thread(read)
