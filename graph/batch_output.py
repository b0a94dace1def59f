"""The output file of `raa score-batch` (`graph.batch` describes its rows and keys): reading it once per run,
locking it for the batch, and appending rows as runs finish (`RowWriter`). Split from graph.batch, which
re-exports these names.

Decisions where the issue was silent are described in `graph.batch` ("The output is read and parsed once",
"Only the process that owns the output file writes to it", the per-kind fault counts of `RowWriter`).
A row that cannot be appended (disk full, a read-only file or file system) is `OutputWriteError`, naming the file
and the problem: `raa score-batch` prints it as one error line and exits 2 (it was a traceback), after the closing
lines of the rows written before (`graph.batch_ending.stopped`, as on Ctrl-C); those rows stay, and a row torn by
the failure is cut off by the next run (`tools.jsonl.mend_tail`). So is a failure to prepare the file for rows (its
folder, the cut of a torn last line) or to rewrite it without the rows to score again
(`graph.batch_resume.drop_rows`): those leave the file as it was, before any row is written.
No row is appended after a failed append (it would follow a torn line in the middle of the file, where the mend does
not reach); the usage of a run whose row is not written (the failed one, and those that finish after it: rows the
worker processes had sent, read as the batch stops) is still counted (`RowWriter.usage`): its calls were made, and
the closing line says what the batch cost. A run that ends without a result (cancelled as the batch stops, or lost
with a worker process that died) is counted apart (`RowWriter.unfinished`): its usage sits in the agent's per-node
counters, summed into its result only as it ends, so the calls it made cannot be added; the closing lines say that
there were such runs and that their calls are not in the usage.
A Ctrl-C while a row is written and counted lands once it is both or neither (`ctrl_c_held`): with worker processes
the parent's main thread takes a KeyboardInterrupt at any point, and one between the append and the count left a row
in the file that the closing counts did not have.
"""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.file_kinds import read_file
from tools.jsonl import decode_text, mend_tail, strict_dumps, text_lines, written_file


class OutputBusy(RuntimeError):
    """Another score-batch is writing the same output file."""


def lock_output(out: Path) -> Any:
    """An exclusive lock on the output file for this batch (an open file to close when done; the system drops
    it when the process ends, however it ends); OutputBusy when another process holds it: two batches into
    one output would both score every item and write each row twice. The lock sits beside the file the rows go
    to (a symlinked ``out`` is followed, as `tools.jsonl.write_text_atomic` follows it), so two names of one file
    are one output."""
    import fcntl

    real = written_file(out)
    real.parent.mkdir(parents=True, exist_ok=True)  # also a link's target folder, for a file not written yet
    fh = real.with_name(f".{real.name}.lock").open("a")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        raise OutputBusy(f"another score-batch is writing {out}; wait for it, or write to another --out") from None
    return fh


NOT_JSON = object()
"""`Output.values` of a line that is not JSON (a torn write, or a file that holds no rows)."""


@dataclass(frozen=True)
class Output:
    """A score-batch output as `read_output` read it, once per run: its lines, each one's JSON value (`NOT_JSON`
    when it is none), the byte where its text stops being UTF-8 (None when it is UTF-8; then no lines), and its
    `file_stamp` at the read."""

    path: Path
    lines: list[str]
    values: list[Any]
    not_utf8_at: int | None
    stamp: tuple[int, int, int] | None


def file_stamp(path: Path) -> tuple[int, int, int] | None:
    """(inode, size, mtime in ns) of `path`, None without the file: an append or a rewrite in one rename changes it."""
    try:
        st = path.stat()
    except (FileNotFoundError, NotADirectoryError):  # as Path.exists: a parent that is a file holds no file
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def read_output(out: Path) -> Output:
    """The output file `out` read and parsed once (an empty Output without the file). The stamp is of the very file
    read (`tools.file_kinds.read_file`'s fstat), taken before the read, so a write during it shows as a change: a
    stamp by name, then a read by name, took a file removed in between for one that cannot be read (the batch was
    refused). OSError when it cannot be read."""
    try:
        data, found = read_file(out)  # a FIFO (or /dev/stdout into a pipe) is refused, not waited on
    except (FileNotFoundError, NotADirectoryError):  # as file_stamp: a parent that is a file holds no file
        return Output(out, [], [], None, None)
    stamp = found.st_ino, found.st_size, found.st_mtime_ns
    try:
        lines = text_lines(decode_text(data))  # a byte-order mark skipped (tools.jsonl)
    except UnicodeDecodeError as exc:  # its offset is past the mark: the file's own byte is named
        return Output(out, [], [], exc.start + len(data) - len(exc.object), stamp)
    values = []
    for line in lines:
        try:
            values.append(json.loads(line))
        except ValueError:
            values.append(NOT_JSON)
    return Output(out, lines, values, None, stamp)


def not_results(output: Output) -> str | None:
    """Why the existing file of `output` cannot be a score-batch output, or None (also without the file): text
    that is not UTF-8 (the rows are ASCII JSON), or two or more lines none of which is a row (a JSON object with
    a "key"). An interrupted run can leave a torn line, never a file of them; resuming drops lines that are not
    rows, so another file given as --out by mistake would lose them."""
    out = output.path
    if output.not_utf8_at is not None:
        return f"--out {out} is not a score-batch results file (not UTF-8 text at byte {output.not_utf8_at})"
    if any(isinstance(row, dict) and isinstance(row.get("key"), str) for row in output.values):
        return None
    lines = sum(1 for line in output.lines if line.strip())
    if lines < 2:
        return None
    return f"--out {out} is not a score-batch results file (none of its {lines} lines is a result row)"


def kept_rows(output: Output, leaving: Callable[[Any], Any] | None = None) -> dict[str, dict[str, Any]]:
    """The rows already in the output by key (torn or malformed lines are ignored; of a key written twice, the
    last), less the rows for which `leaving` is true (`graph.batch_resume.stale_rows`: rows about to be dropped)."""
    return {row["key"]: row for row in output.values
            if isinstance(row, dict) and isinstance(row.get("key"), str) and not (leaving and leaving(row))}


def done_keys(output: Output, leaving: Callable[[Any], Any] | None = None) -> set[str]:
    """Keys of the rows already in the output that stay (`kept_rows`)."""
    return set(kept_rows(output, leaving))


class OutputWriteError(RuntimeError):
    """The output file could not be written: a row appended (`RowWriter.write`), the file prepared for rows
    (`RowWriter`) or rewritten without rows (`graph.batch_resume.drop_rows`). The message names the file, the OS
    error and what state the file is left in."""


def os_problem(exc: OSError) -> str:
    """The OS error as an error line words it: its text and number ("No space left on device (errno 28)")."""
    return (exc.strerror or type(exc).__name__) + (f" (errno {exc.errno})" if exc.errno else "")


def append_line(path: Path, line: str) -> None:
    """Append `line` and a newline to `path` in one write (the rows' only way into the output)."""
    with path.open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def fault_kind(result: dict[str, Any]) -> tuple[str, str]:
    """(what the summary groups an ineligible row's `result` under, its first reason): "stage: kind" of its first
    fault ("batch: internal" / "batch: timeout" for a dead or hung worker), else the text before the first
    reason's first colon (a row written before rows recorded faults: "batch"); a bad input is "input" whichever
    stage found it (a bad manifest line, or an empty instruction the quality node found, "quality: input: ...",
    which counted beside the undecodable clips). Grouped by stage alone, one clip the model refused and then every
    clip of an endpoint that went down were one group named by the refusal."""
    reason = str(next(iter(result.get("reasons") or []), "no reason recorded"))
    fault = next(iter(result.get("faults") or []), None)
    if isinstance(fault, dict) and isinstance(fault.get("stage"), str) and isinstance(fault.get("kind"), str):
        return ("input" if fault["kind"] == "input" else f"{fault['stage']}: {fault['kind']}"), reason
    parts = reason.split(": ", 2)
    if len(parts) == 3 and parts[1] == "input":
        return "input", reason
    return (reason.split(":", 1)[0] if ":" in reason else "other"), reason


@contextmanager
def ctrl_c_held() -> Iterator[None]:
    """A Ctrl-C (SIGINT) in the block taken once the block ends, by the handler there before (a KeyboardInterrupt, or
    asyncio's cancel of its main task): `RowWriter`'s append of a row and its count happen both or neither. A second
    Ctrl-C in the block passes both on at once, in order (a write that hangs, on a stalled mount or a terminal paused
    under the progress bar, is still stopped; asyncio's handler raises KeyboardInterrupt at its second, as it did
    before rows were held), and the handler is the one before from there. Nothing held outside the main thread (no
    handler can be set there) or without a Python handler (ignored, or not set from Python)."""
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        yield
        return
    came: list[Any] = []  # the frames of the Ctrl-Cs held, not yet passed on

    def pass_on() -> None:  # each taken off before its call (one that raises is not passed on twice)
        while came:
            previous(signal.SIGINT, came.pop(0))

    def hold(signum: int, frame: Any) -> None:
        came.append(frame)
        if len(came) > 1:  # pressed again: meant
            signal.signal(signal.SIGINT, previous)
            pass_on()

    signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        pass_on()


class RowWriter:
    """Appends output rows to the JSONL file and counts them by result status."""

    def __init__(self, out: Path, on_row: Callable[[], None] | None = None,
                 scorer: dict[str, Any] | None = None) -> None:
        self.out = out
        self.on_row = on_row
        self.scorer = scorer
        """Recorded in every row as "scorer" (`scorer_of`), when given."""
        self.counts = {"scored": 0, "zero": 0, "ineligible": 0}
        self.usage: dict[str, int] = {}
        """Backbone usage summed over the rows given to `write` (calls, images, tokens, cache hits), written or not:
        what the runs cost (module docstring)."""
        self.unwritten = 0
        """Rows of runs (as `runs`) given to `write` that were not written (the one whose append failed, and every one
        after it): finished runs the resume scores again."""
        self.unfinished = 0
        """Runs that ended without a result (`graph.batch.run_batch`, `graph.batch_procs`): in flight when the batch
        stopped, or in a worker process that died or was killed. Their model calls are not in `usage`: a run's usage
        is known only from its result (module docstring)."""
        self.lost = 0
        """Of `unfinished`, the runs lost with a worker process that died or was killed (`graph.batch_procs`): their
        clips are tried again, so a batch that finished can have such runs; the others were in flight as it stopped."""
        self.failed: OutputWriteError | None = None
        """The failure of an append; no row is appended after it (module docstring)."""
        self.runs = 0
        """Rows written of runs, those whose result has a run id: the rows that have a trace, or should have. Not those
        of bad manifest lines, of a clip whose worker process died on each attempt (`graph.batch_deaths`: counted
        as runs, though no run of it finished and none has a trace), of a call refused for its run id, nor repeats
        (`write_repeat`)."""
        self.faults: dict[str, tuple[int, str]] = {}
        """Per `fault_kind` of the ineligible rows ("observe: transport", "input"): how many rows and the first
        one's reason."""
        self.followers: dict[str, list[dict[str, Any]]] = {}
        """Per key: the fields of the rows to write with the row of that key when it is written (`follow`)."""
        self.unsaved_traces = 0
        """Rows whose result says its trace was not saved (`RewardResult.trace_saved` false): their rewards
        stand, but `raa trace` cannot show those runs. Rows without the field (older outputs) count as saved."""
        try:  # both change nothing when they fail: mend_tail's one truncate or one-byte write does not happen
            out.parent.mkdir(parents=True, exist_ok=True)
            mend_tail(out)  # a torn last line: cut (its item is re-run) or closed, never left inside the file
        except OSError as exc:
            raise OutputWriteError(f"cannot prepare --out {out} for new rows: {os_problem(exc)}; the file is left "
                                   "as it was") from exc

    def write(self, line: str, status: str) -> None:
        """Append one row (`result_line` output) whose result has `status`, then the rows that `follow` it; a Ctrl-C
        meanwhile lands once they are written and counted (`ctrl_c_held`)."""
        row = json.loads(line)
        row = {**row, "scorer": self.scorer} if self.scorer is not None else row
        run = bool((row.get("result") or {}).get("run_id"))  # a row with no run id had no run (`runs`)
        with ctrl_c_held():
            for k, v in (row.get("result") or {}).get("usage", {}).items():  # first: the calls were made, row or not
                self.usage[k] = self.usage.get(k, 0) + int(v)
            try:
                written = self._append(row)
            except OutputWriteError:
                self.unwritten += run
                raise
            if not written:
                self.unwritten += run
                return
            self._count(row, status)
            self.runs += run
            if (row.get("result") or {}).get("trace_saved") is False:
                self.unsaved_traces += 1
            if self.on_row is not None:
                self.on_row()
            for fields in self.followers.pop(row["key"], []):
                self.write_repeat(row, fields)

    def follow(self, key: str, fields: dict[str, Any]) -> None:
        """Write a row of `fields` over the row of `key` once that row is written (`write_repeat`)."""
        self.followers.setdefault(key, []).append(fields)

    def write_repeat(self, row: dict[str, Any], fields: dict[str, Any]) -> None:
        """Append `row` (an output row, as written) with `fields` over it: the row of a manifest line that takes
        another line's result (`graph.batch.write_repeats`). Counted by status and fault like any row; not in the
        usage (no model call of its own) nor the progress (`on_row`: the clips scored)."""
        status = (row.get("result") or {}).get("status")
        with ctrl_c_held():  # written and counted, or neither
            if self._append({**row, **fields}):
                self._count(row, status if status in self.counts else "ineligible")

    def _append(self, row: dict[str, Any]) -> bool:
        """Append `row`: True once written, False without a write after an append failed (`failed`);
        OutputWriteError when this append fails."""
        if self.failed is not None:
            return False
        try:
            append_line(self.out, strict_dumps(row))
        except OSError as exc:
            self.failed = OutputWriteError(f"cannot write --out {self.out}: {os_problem(exc)}; "
                                           f"{sum(self.counts.values())} row(s) written this run stay")
            raise self.failed from exc
        return True

    def _count(self, row: dict[str, Any], status: str) -> None:
        self.counts[status] += 1
        if status == "ineligible":
            kind, reason = fault_kind(row.get("result") or {})
            n, first = self.faults.get(kind, (0, reason))
            self.faults[kind] = (n + 1, first)
