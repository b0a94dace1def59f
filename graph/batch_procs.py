"""Batch scoring over worker processes (`raa score-batch --processes N`).

Why processes: through `ChatOpenAI` each model request costs ~20 ms of CPU on the process's event
loop (benchmarks/backbone_http.py), so one process scores at most ~6 clips per second however fast
the server answers; and a clip that crashes the decoder (a segfault inside FFmpeg) would take a
single-process batch down with every run in flight.

How: this process reads the manifest, owns the output file and hands items, one message each, to N
spawned workers over pipes. At most `concurrency` runs are in flight over all workers together (the
load on the model server is what `--concurrency` is about); a new item goes to the ready worker with
the fewest runs in flight. Each worker builds one agent exactly as the in-process batch does
(`graph.batch.build_batch_agent`, with the settings this process read at the edge, the chat model
`graph.backbone.default_chat_model`, default tools) and sends back each finished row (`graph.batch_worker`); traces of all
workers go to the one trace database (SQLite in WAL mode, which serialises the writers).

Decisions where the issue was silent:
- Start method "spawn": the parent has live threads (worker pools, SQLite), which `fork` would copy
  in an undefined state. Workers are not daemonic (they may start processes of their own); a worker
  whose pipe to the parent closes (the parent was killed) cancels its runs in flight and exits, since
  their rows could no longer be written (their items stay for the resume). A worker needs a few
  seconds to import and build its agent; items go only to workers that said they are ready.
- A worker that dies (crash, signal, out-of-memory kill) loses the runs it had in flight. With
  several in flight, any one of them may be the cause, so each is tried again *alone*: sent to a
  worker with nothing else in flight, which takes no other item until it is answered (while such
  retries wait and none is running, the least busy worker gets no new items, so it drains). An item
  gets an ineligible row naming the exit status only when a worker died with it alone in flight and
  it had already been in flight at an earlier death (`MAX_ATTEMPTS`); its neighbours in a crash are
  never blamed for it. The row names the cause of each of those deaths in order when they differ (attempt
  1 hung and was killed, attempt 2 raised), or the one cause once when all were the same ("died (signal
  9) on each of 2 attempts"); each cause is cut at `graph.batch_deaths.CAUSE_CHARS`, at most `MAX_CAUSES` named, so a
  long error text cannot swell the row. The first ready worker does not take the whole `concurrency`: each worker
  gets at most its share (`concurrency` over the workers started), so a crash loses fewer runs. A
  replacement worker is started while work remains, so one bad clip never stops the batch.
- A run that takes longer than `run_timeout_s` (a native hang in a decoder or tool thread, which no
  asyncio timeout can stop) gets its worker killed, and is handled like a death with that run alone
  in flight: tried once more alone, then an ineligible row saying it did not finish in time. The
  other runs of that worker go back to the queue as they were (they had not hung). In one process
  (`--processes 1`) there is no such limit: a hang there cannot be stopped without killing the batch.
  Only a worker still running with its pipe open is killed as hung: one that has exited, shut its pipe or sent
  "fatal" (its last message) is ending on its own and is buried with its own cause (exit status, error), even when
  the parent finds its end only after a run's deadline has passed (a loaded or stalled parent: the row said "did not
  finish within N s" for a crash or an error the worker had already sent).
- A worker that fails before it is ready (bad trace path, import error, a preset's tool model that
  cannot load) is not replaced; when no
  worker is left, `BatchError` carries its message and the items not yet scored stay unwritten, so
  the batch resumes after the cause is fixed. When only some of the workers started with the batch
  fail, the batch goes on with the others (their rows are as good), and once each of those workers is
  ready or gone `log` gets one warning line: how many of them failed and the first failure's cause
  (the CLI prints it on stderr with the progress); a replacement worker that fails to start gets its own
  warning line (before, the batch went on with fewer processes than asked and said nothing).
- Replacements are capped (`processes` plus `MAX_ATTEMPTS` per item): a death with runs in flight uses up their
  attempts, but one with none (a worker that crashes while idle) blames no clip, so workers that keep dying idle
  could spend the cap; then `BatchError` names the last death (exit status or signal, the worker's error:
  `no_worker_left`; it said "no batch worker process could start: " and nothing more).
- At most `concurrency` workers start (and no more than there are items): with `processes` above `concurrency`
  the others could never get a run (at most `concurrency` are in flight over all workers) yet each loaded the
  tool models. Capped rather than refused, since the flags' meaning stays clear (`log` gets a note saying so):
  `--processes` is the most worker processes, `--concurrency` the runs in flight.
- A worker whose pipe is at its end while its process lives on (it is exiting, or shut its end) gets no more items
  and is waited on through its process alone until it exits and is buried as any death: a pipe at its end is
  always readable, so the parent's wait returned at once and it spun at full CPU until the process was gone. One
  still alive `STOP_TIMEOUT_S` later (its exit hangs: a thread it joins at exit, with `--run-timeout 0` nothing else
  would end it) is killed. Likewise one whose process is ending (its sentinel ready): joined at once, not polled
  until `is_alive` says so.
- Ctrl-C is this process's alone: workers do nothing on SIGINT (`graph.batch_worker`), and the KeyboardInterrupt
  here terminates them (`_stop`); runs in flight get no row, so the same command resumes them. Rows the workers had
  already sent are read first (what is in the pipes, for `graph.batch_pipes.DRAIN_S` at most, waiting for nothing)
  and written: they were lost with the workers, so the resume scored those clips again (and on a paid API paid for them twice).
  So are they when a row cannot be written (a full disk), for their runs' usage alone (`graph.batch_output`).
  A row that cannot be written as they are after a Ctrl-C is on `RowWriter.failed`, and the KeyboardInterrupt is
  raised: `graph.batch_ending.stopped` says both (the OutputWriteError raised instead, the Ctrl-C went unsaid).
  A worker that ended on the Ctrl-C by itself was buried as a death (a replacement started, an interrupted clip could
  get an ineligible row).
- Rows of items that could not be dispatched are never invented: every item ends as a row from a
  worker, an ineligible row with the reason, or unwritten (BatchError / interrupt) for the resume.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import multiprocessing as mp
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from graph.batch import OutputWriteError, RowWriter, result_line, write_bad_lines
from graph.batch_deaths import HUNG, cause_text, death_fault, exit_text, no_worker_left
from graph.batch_pipes import drain, receive
from graph.batch_worker import run_worker, send_quietly, starting_worker, worker_main
from graph.settings import BackboneSettings, TraceDurability

MAX_ATTEMPTS = 2
"""Worker deaths with an item in flight after which it is ineligible (the last one with it alone in flight)."""
RUN_TIMEOUT_S = 3600.0
"""Default seconds one run may take in a worker before the worker is killed (a hang: see module docstring)."""
STOP_TIMEOUT_S = 30.0
"""Seconds a worker may take to exit after the last item before it is terminated."""


class BatchError(RuntimeError):
    """The batch cannot go on (no worker process could start); unscored items stay unwritten."""


# ---------------------------------------------------------------------------------------------- parent
@dataclass
class _Job:
    item: dict[str, Any]
    causes: list[str] = field(default_factory=list)
    """Cause of each worker death while this item was in flight, in order (hangs count as deaths)."""
    alone: bool = False
    """Retry it with nothing else in flight in its worker (it was in flight when a worker died)."""


@dataclass
class _Worker:
    process: Any
    conn: Connection
    ready: bool = False
    fatal: str = ""
    initial: bool = False
    """One of the workers started with the batch (not a replacement for one that died)."""
    in_flight: dict[int, tuple[_Job, float]] = field(default_factory=dict)
    """ticket -> (job, deadline on the monotonic clock) of the items sent and not yet answered (a ticket per
    dispatch, so two manifest lines with the same key are two runs)."""
    hung: set[int] = field(default_factory=set)
    """Tickets past their deadline; the worker was killed for them."""
    closed_at: float | None = None
    """When its pipe was found at its end (the worker shut it or is exiting; monotonic clock): nothing more can come
    from it or go to it, so the parent waits on its process alone (a pipe at its end is always readable: waiting on
    it returned at once), and kills it after `STOP_TIMEOUT_S`."""
    torn: bool = False
    """A read of its pipe was interrupted (a Ctrl-C inside ``recv``): the pipe may be in the middle of a message,
    so `graph.batch_pipes.drain` reads nothing more from it."""

    def isolating(self) -> bool:
        return any(job.alone for job, _ in self.in_flight.values())


def run_batch_processes(items: list[dict[str, Any]], writer: RowWriter, *, settings: BackboneSettings,
                        preset: str, processes: int, concurrency: int, durability: TraceDurability = "exit",
                        log: Callable[[str], None] | None = None, draw: int = 0,
                        run_timeout_s: float | None = RUN_TIMEOUT_S) -> dict[str, int]:
    """Score `items` over `processes` worker processes (at most `concurrency` of them: module docstring) with at
    most `concurrency` runs in flight in all;
    rows go to `writer` as they arrive; `log` gets one line per worker that died, and warnings of workers
    that failed to start while the batch goes on. A run taking over
    `run_timeout_s` (None: no limit) has its worker killed. Returns the writer's counts; raises
    BatchError when no worker can start (see module docstring)."""
    if processes < 1 or concurrency < 1:
        raise ValueError(f"processes and concurrency must be >= 1, got {processes} and {concurrency}")
    if run_timeout_s is not None and not run_timeout_s > 0:
        raise ValueError(f"run_timeout_s must be > 0 or None, got {run_timeout_s}")
    pending = deque(_Job(item) for item in write_bad_lines(items, writer))
    suspects: deque[_Job] = deque()  # to be retried alone
    ctx = mp.get_context("spawn")
    workers: list[_Worker] = []
    spawns_left = processes + MAX_ATTEMPTS * len(pending)  # deaths with runs in flight use up their attempts;
    # deaths with none use up only this (`no_worker_left` names the last when it is spent)
    spawned = 0
    startup_errors: list[str] = []
    last_death = ""  # how the last worker that had been ready ended (`no_worker_left`)
    initial_failures: list[str] = []  # the start failures of the workers started with the batch
    warned = False  # about initial_failures
    tickets = itertools.count()

    def spawn(initial: bool = False) -> None:
        nonlocal spawns_left, spawned
        parent_end, child_end = ctx.Pipe()
        # not daemonic: a worker may start processes of its own; it exits when the parent's pipe closes
        proc = ctx.Process(target=run_worker, args=(worker_main, child_end, settings, preset, durability, draw),
                           name="raa-batch-worker")
        try:
            with starting_worker():  # it starts with SIGINT ignored: a Ctrl-C is this process's (graph.batch_worker);
                proc.start()  # and no KeyboardInterrupt here can leave a started worker out of `workers` (_stop)
                workers.append(_Worker(proc, parent_end, initial=initial))
        except BaseException:  # no process: nobody else would close its pipe
            parent_end.close()
            raise
        finally:
            child_end.close()  # so the parent sees EOF when the worker exits
        spawns_left -= 1
        spawned += 1

    def send(w: _Worker, job: _Job) -> bool:
        ticket = next(tickets)
        try:
            w.conn.send(("item", ticket, job.item))
        except OSError:  # it died just now (bury() handles the death)
            return False
        deadline = time.monotonic() + run_timeout_s if run_timeout_s is not None else math.inf
        w.in_flight[ticket] = (job, deadline)
        return True

    def dispatch() -> None:
        ready = [w for w in workers if w.ready and w.closed_at is None and w.process.is_alive()]
        room = concurrency - sum(len(w.in_flight) for w in workers)
        for w in ready:  # suspects: one each to an idle worker
            if suspects and room > 0 and not w.in_flight:
                if send(w, suspects[0]):
                    suspects.popleft()
                    room -= 1
        open_ = [w for w in ready if w.process.is_alive() and not w.isolating()]
        if suspects and open_ and not any(w.isolating() for w in ready):  # let one drain for the next suspect
            open_.remove(min(open_, key=lambda w: len(w.in_flight)))
        share = math.ceil(concurrency / len(workers))
        while pending and open_ and room > 0:
            target = min(open_, key=lambda w: len(w.in_flight))
            if len(target.in_flight) >= share:
                return
            if send(target, pending[0]):
                pending.popleft()
                room -= 1
            else:
                open_.remove(target)

    def kill_hung(w: _Worker, now: float) -> None:
        """Kill a live worker whose exit hangs, or one with a run past its deadline (a hang): not one whose pipe is at
        its end or that sent "fatal" (it is ending on its own: killed only if its exit hangs, buried with its cause)."""
        if w.closed_at is not None:
            if now - w.closed_at > STOP_TIMEOUT_S:  # its exit hangs: it can send nothing
                w.process.kill()
            return
        overdue = {t for t, (_, deadline) in w.in_flight.items() if deadline <= now}
        if overdue and not w.hung:
            w.hung = overdue
            w.process.kill()

    def bury(w: _Worker) -> None:
        from graph.run_results import fault_result

        nonlocal last_death
        workers.remove(w)
        w.conn.close()
        how = exit_text(w.process.exitcode)
        if not w.ready:
            startup_errors.append(w.fatal or f"worker process ended before it was ready ({how})")
            if w.initial:
                initial_failures.append(startup_errors[-1])
            elif log is not None:
                log(f"warning: a replacement batch worker process failed to start, {len(workers)} left: "
                    f"{cause_text(startup_errors[-1])}")
        writer.unfinished += len(w.in_flight)  # each cut short, hung or not: the calls it made went with it
        writer.lost += len(w.in_flight)
        lost = {t: job for t, (job, _) in w.in_flight.items() if not w.hung or t in w.hung}
        requeue = [job for t, (job, _) in w.in_flight.items() if t not in lost]  # a neighbour hung, not them
        if w.hung:
            how = f"killed: a run took over {run_timeout_s:g} s"
        cause = (f"{HUNG} {run_timeout_s:g} s (its worker process was killed)" if w.hung
                 else f"died ({how}{': ' + w.fatal if w.fatal else ''})")
        blamed = []
        for job in lost.values():
            job.causes.append(cause)
            if len(lost) == 1 and len(job.causes) >= MAX_ATTEMPTS:
                blamed.append(job)
            else:
                job.alone = True
                suspects.append(job)
        pending.extendleft(reversed(requeue))
        if w.ready:
            flight = f"{len(w.in_flight)} run(s)" if w.in_flight else "no run"
            last_death = (f"was {how}" if w.hung else cause) + f" with {flight} in flight"
        if w.ready and log is not None:
            log(f"batch worker {w.process.pid} {'was ' + how if w.hung else f'died ({how})'} with "
                f"{len(w.in_flight)} run(s) in flight: {len(lost) - len(blamed)} to retry alone, "
                f"{len(requeue)} requeued, {len(blamed)} ineligible")
        for job in blamed:
            writer.write(result_line(job.item, fault_result(job.item["preset"], death_fault(job.causes))),
                         "ineligible")
        if w.ready and (pending or suspects) and spawns_left > 0:
            spawn()

    def warn_start_failures() -> None:
        """Once every worker started with the batch is ready or gone: say how many failed, if some did and the
        batch goes on with the others (when all failed, BatchError says why instead)."""
        nonlocal warned
        if warned or not initial_failures or any(w.initial and not w.ready for w in workers):
            return
        warned = True
        if log is not None and len(initial_failures) < started:
            log(f"warning: {len(initial_failures)} of {started} batch worker processes failed to start, going on "
                f"with {started - len(initial_failures)}: {cause_text(initial_failures[0])}")

    finished = False
    try:
        started = min(processes, concurrency, len(pending))
        if processes > concurrency and log is not None:
            log(f"note: --processes {processes} > --concurrency {concurrency}: starting {started} worker process(es) "
                "(a worker beyond the runs in flight would get no run and still load the tool models)")
        for _ in range(started):
            spawn(initial=True)
        while pending or suspects or any(w.in_flight for w in workers):
            if not workers:
                raise BatchError(no_worker_left(startup_errors, cause_text(last_death), spawned))
            dispatch()
            ready = wait([w.conn for w in workers if w.closed_at is None] + [w.process.sentinel for w in workers],
                         timeout=1.0)
            now = time.monotonic()
            for w in list(workers):
                receive(w, writer)
                if w.fatal and w.closed_at is None:  # its last message: it is exiting (on this clock: kill_hung)
                    w.closed_at = now
                # its sentinel is ready once the process has closed its files, a moment before the system has
                # it ended (is_alive is True until then): join waits out that moment instead of the loop. One that
                # ended by itself is buried with its own cause, even when a run's deadline passed before this saw it
                if w.process.sentinel in ready or not w.process.is_alive():
                    receive(w, writer)  # rows sent just before it exited
                    w.process.join()  # sets its exit code
                    bury(w)
                else:  # still running: killed if a run or its exit hangs
                    kill_hung(w, now)
            warn_start_failures()
        finished = True
    except KeyboardInterrupt:  # rows already in the pipes are finished runs: write them, or the resume pays twice
        with contextlib.suppress(OutputWriteError):  # on `writer.failed`: said with the Ctrl-C that stopped the batch
            drain(workers, writer)
        raise
    except OutputWriteError:  # no row can be written now: the rows in the pipes are read for their runs' usage alone
        drain(workers, writer)
        raise
    finally:
        if not finished:  # the rows in the pipes drained: the runs left had not finished
            writer.unfinished += sum(len(w.in_flight) for w in workers)
        _stop(workers, graceful=finished)
    return writer.counts


def _stop(workers: list[_Worker], *, graceful: bool) -> None:
    """Ask every worker to exit (graceful: all runs are answered) or terminate it at once (an error or
    interrupt in this process: rows of runs still in flight could no longer be written). Whatever happens meanwhile
    (a Ctrl-C while waiting for them to exit: they do nothing on SIGINT), none is left running."""
    try:
        if graceful:
            for w in workers:
                send_quietly(w.conn, ("stop",))
            for w in workers:
                w.process.join(STOP_TIMEOUT_S)
    finally:  # not graceful, past STOP_TIMEOUT_S, or interrupted while waiting
        for w in workers:
            if w.process.is_alive():
                w.process.terminate()
        for w in workers:
            w.process.join(5)
            if w.process.is_alive():
                w.process.kill()
                w.process.join(5)
            w.conn.close()
