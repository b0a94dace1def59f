"""How a `raa score-batch` run ends (`graph.batch_command`): its closing lines (this run's rows by status, what they
cost, the faults of the ineligible ones: `closing_lines`), a stop before its last row (`stopped`: on Ctrl-C or on an
error, the closing lines and how to resume), and the removal of other manifests' copies that the rows written again
replaced (`drop_replaced_copies`). Split from graph/batch_command.py (its size); the words are unchanged.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, NoReturn

import typer


def drop_replaced_copies(output: Any, others: list[dict[str, Any]]) -> tuple[Any, bool]:
    """`graph.batch_repeat_rows.drop_replaced` of `others` (other manifests' copies of a row this run scored again) in
    `output`, the file read once for it: the output as it is left (None without copies, or when it cannot be read or a
    Ctrl-C cut the removal short), and whether a Ctrl-C did. A file that cannot be read or rewritten is said in a
    warning line (the old copies stay beside the new ones, the last of each key counting, until the next run of either
    manifest removes them), and so is a Ctrl-C there (the file is rewritten in one rename: no row lost; whether the
    rename happened is told by the file's stamp); then the caller says the closing lines and exits 130 (it ended with a
    traceback, the rows written and their cost unsaid). A Ctrl-C again while that is said is held until it is, then
    taken as the first (`graph.batch_output.ctrl_c_held`; it escaped as a bare KeyboardInterrupt)."""
    from graph.batch import file_stamp, read_output
    from graph.batch_output import ctrl_c_held
    from graph.batch_repeat_rows import drop_replaced

    if not others:
        return None, False
    now = None
    try:
        now = read_output(output.path)
        return drop_replaced(output, now, others), False
    except OSError as exc:  # the rewrite did not happen: the file is as `now` read it (when it could be read)
        typer.echo(f"warning: cannot remove from {output.path} the old rows of other manifests replaced by new copies "
                   f"({type(exc).__name__}: {exc}): the next run removes them", err=True)
        return now, False
    except KeyboardInterrupt:  # the file as `now` read it, or the rewrite renamed over it (no other writer: locked)
        with contextlib.suppress(KeyboardInterrupt), ctrl_c_held():  # a Ctrl-C again: held till said, taken as this
            try:
                removed: bool | None = now is not None and file_stamp(now.path) != now.stamp
            except OSError:  # cannot be told
                removed = None
            held = ("they were removed (one row per key)" if removed else
                    "they stay beside the new ones (the last of each key counts); the next run removes them"
                    if removed is False else "they were removed, or stay beside the new ones (the last of each key "
                    "counts) until the next run removes them")
            typer.echo(f"interrupted while removing from {output.path} the old rows of other manifests replaced by "
                       f"new copies: {held}", err=True)
        return None, True


def stopped(writer: Any, out: Path, error: BaseException | None, *, interrupted: bool = False) -> NoReturn:
    """score-batch's end when the batch stops before its last row, on Ctrl-C (`interrupted`, `error` None: exit 130)
    or on `error` (no worker process left, a row that cannot be written: a full disk, a trace database or stage cache
    that cannot be opened once the bad lines' rows are written; "error: ..." and exit 2): the closing lines of the
    rows written so far (`closing_lines`: what they cost, the faults of the ineligible ones), then that the clips
    not yet scored got no row and the same command resumes the batch. Said outside the progress bar (one printed
    while it showed came before it). An error stop ended with its error line alone.
    `interrupted` with an `error`: a Ctrl-C and a row that could not be written (`RowWriter.failed`: a full disk
    while the rows the workers had sent before the Ctrl-C were written, `graph.batch_pipes.drain`): both are said,
    and the exit status is the error's, 2, not 130: the researcher knows of the Ctrl-C, not of the error, and the
    resume that 130 invites fails until the error is fixed (such a stop ended as the error alone, the Ctrl-C
    unsaid). A Ctrl-C in the closing lines (a second one) cuts them short, not the lines after them (how to resume)."""
    closing_lines_cut(writer, out)
    if error is None:
        typer.echo("interrupted: clips whose run had not finished got no row; the same command resumes the batch",
                   err=True)
    else:
        typer.echo(f"error: {error}", err=True)
        typer.echo(("interrupted (Ctrl-C), and a row could not be written (the error above): " if interrupted
                    else "stopped: ")
                   + "clips with no row yet (a run not finished, or its row not written) are scored when the same "
                   "command resumes the batch, once the error is fixed", err=True)
    raise typer.Exit(130 if error is None else 2) from error


def closing_lines_cut(writer: Any, out: Path) -> bool:
    """`closing_lines`; True when a Ctrl-C cut them short (the caller says what the output holds and exits 130: the
    KeyboardInterrupt ended the command with nothing said, though the rows were written)."""
    try:
        closing_lines(writer, out)
    except KeyboardInterrupt:
        return True
    return False


def closing_lines(writer: Any, out: Path) -> None:
    """score-batch's closing line (this invocation's rows by status and the model usage of its runs, their rows
    written or not: what the batch cost) and, under it, one line per failing stage and fault kind, the runs whose
    trace was not saved among the rows of runs (a bad manifest line's or a repeated line's row has no trace), and the
    finished runs whose row could not be written (a full disk), and the runs that ended without a result, whose
    calls are not in the usage (`RowWriter.unfinished`), said apart as in flight when the batch stopped or lost with
    a worker process (`RowWriter.lost`: an in-process batch has none, and a batch whose dead worker's clips were tried
    again finished with every row)."""
    usage = " ".join(f"{k}={v}" for k, v in writer.usage.items())
    typer.echo(" ".join(f"{k}={v}" for k, v in writer.counts.items()) + (f"  usage: {usage}" if usage else "")
               + f"  -> {out}", err=True)
    for kind, (n, first) in sorted(writer.faults.items(), key=lambda kv: -kv[1][0]):
        typer.echo(f"  ineligible ({kind}): {n}, first: {first[:300]}", err=True)
    if writer.unsaved_traces:
        typer.echo(f"  traces not saved: {writer.unsaved_traces} of {writer.runs} run(s) (their results stand; "
                   "`raa trace` cannot show them, their last reason says why)", err=True)
    if writer.unfinished:
        how = ([f"{n} in flight as the batch stopped"] if (n := writer.unfinished - writer.lost) else []) + (
            [f"{writer.lost} lost with a worker process that crashed or was killed, each clip tried again up to its "
             "last attempt"]
            if writer.lost else [])
        typer.echo(f"  {writer.unfinished} run(s) ended without a result ({'; '.join(how)}): the model calls they made "
                   "are not in the usage above", err=True)
    if writer.unwritten:
        typer.echo(f"  {writer.unwritten} finished run(s) whose row could not be written are in the usage above (the "
                   "resume scores them again)", err=True)
