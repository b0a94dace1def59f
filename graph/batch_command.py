"""`raa score-batch`: score every clip of a manifest into a resumable JSONL output; registered in graph/cli.py.

The edge, as graph/commands.py (exit 0 once the batch ran, 2 for a configuration / input error or a batch stopped
mid-run by one, 130 after Ctrl-C, 2 after a Ctrl-C and a row that could not be written; a stopped batch first says
the rows it wrote, `graph.batch_ending`; a Ctrl-C during the endpoint check or the tools' load, before any row is
written or removed, says so): settings, the chat model (`make_chat_model`, the seam tests monkeypatch), the tools
and the endpoint pre-flight come from that module, looked up when the command runs.

Rows, resume keys and bad manifest lines are described in `graph.batch`; the summary counts the rows written
whose trace was not saved (`RowWriter.unsaved_traces`); runs use an AsyncSqliteSaver as checkpointer, so rows
are appended as runs finish and traces stay readable. `--processes N` (N > 1) spreads the runs over worker
processes (`graph.batch_procs`); those build the chat model with `graph.backbone.default_chat_model`, not with
`make_chat_model`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from graph import commands
from graph.batch_ending import closing_lines_cut, drop_replaced_copies, stopped
from graph.score_inputs import any_input_fine
from graph.stores import StoreError
from graph.tracing import open_async_saver
from tools.file_kinds import NOTHING, file_problem, missing_file

# markup and emoji codes off, as graph/commands.py's console: reasons and paths in the log lines are data
_err = Console(stderr=True, markup=False, emoji=False)


def score_batch_command(
    manifest: Path = typer.Argument(..., help="manifest.jsonl with rows {path, instruction, ...}."),
    out: Path = typer.Option(Path("results.jsonl"), "--out", help="JSONL output (appended; resumable)."),
    concurrency: int = typer.Option(16, "--concurrency", min=1, max=256,
                                    help="Runs in flight at once (over all processes)."),
    preset: str = typer.Option("full", "--preset", help="Agent preset (paper Table 2)."),
    processes: int = typer.Option(1, "--processes", min=1, max=64,
                                  help="Worker processes (1: score in this process); at most --concurrency are "
                                       "started (more would get no run yet load the tool models)."),
    run_timeout: float = typer.Option(3600.0, "--run-timeout", min=0.0,
                                      help="With --processes > 1: seconds one run may take before its worker "
                                           "is killed (a hang); it is retried alone once, then ineligible. 0: no limit."),
    retry_ineligible: bool = typer.Option(False, "--retry-ineligible",
                                          help="Score again the items whose row is ineligible for a reason a rerun "
                                               "can fix (endpoint, model, tool faults; not bad input; a video "
                                               "fault only once the clip's size or mtime changed since its run, or "
                                               "once a clip not found, not permitted or failed by the machine "
                                               "(I/O error, too many open files, out of memory) can be read; and a quality "
                                               "zero (under 2 frames, uniform) once its clip changed)."),
    draw: int = typer.Option(0, "--draw", min=0,
                             help="Stage-cache draw (as for score); draws of one manifest may share --out "
                                  "(rows say their draw)."),
) -> None:
    """Score every clip of a manifest; items already in the output are skipped."""
    from graph.batch import (
        Output,
        OutputBusy,
        OutputWriteError,
        RowWriter,
        build_batch_agent,
        drop_repeats,
        file_stamp,
        kept_rows,
        lock_output,
        misplaced_paths,
        not_json_lines,
        not_results,
        other_scorer,
        read_output,
        run_batch,
        scorer_of,
        write_bad_lines,
        write_repeats,
    )
    from graph.batch_manifest import read_items, shell_cwd
    from graph.batch_manifest_file import RowManifests, names_file
    from graph.batch_moved import moved_lines, moved_rows, moved_warning
    from graph.batch_procs import BatchError, run_batch_processes
    from graph.batch_repeat_rows import keeping, others_copies, stale_repeats
    from graph.batch_resume import (
        current_fields,
        drop_rows,
        edited_rows,
        fixable_lines,
        fixable_rows,
        removed_lines,
        rerun_command,
        stale_rows,
        told_first,
        updated_lines,
    )

    def say_fixable(rows: Output, said: dict[str, int] | None = None) -> dict[str, int]:
        """Say what `fixable_lines` says of the rows of `rows` (the output) a rerun can fix, naming this batch's
        command: before the run scores (`said` None) the counts `told_first` picks; at its end all but those `said`
        before, unchanged. Returns the counts it was to say."""
        fixable = fixable_rows(rows, manifest, items, preset, draw, manifests=manifests, scorer=scorer_of(settings),
                               cwd=shell)
        if said is None:
            fixable = told_first(fixable, retrying=retry_ineligible)
        for line in fixable_lines(fixable, out, rerun_command(manifest, out, preset, draw), said, preset=preset,
                                  draw=draw):
            typer.echo(line, err=True)
        return fixable

    settings = commands.settings_or_exit(require_endpoint=True)
    shell = shell_cwd(os.environ.get("PWD"))  # the shell's way into the folder (a link left at a folder moved)
    if manifest.is_dir():  # there, but no file: "not found" misled
        inside = manifest / "manifest.jsonl"
        _fail(f"manifest {manifest} is a folder; give the manifest file's path"
              + (f", e.g. {inside}" if inside.is_file() else ""))
    if problem := missing_file(manifest, "manifest"):  # a FIFO (`-m <(...)`) is named, never opened
        _fail(problem)
    try:  # one read of the file, and the file read: what the checks below and the resume judge by
        listed, comments, read = read_items(manifest, preset, draw)
    except (FileNotFoundError, NotADirectoryError) as exc:  # removed since the look above: as if before it
        _fail(file_problem(NOTHING, manifest, "manifest") or "", exc)
    except OSError as exc:  # unreadable (permissions), or another kind of file put there since the look above
        _fail(f"cannot read manifest {manifest}: {type(exc).__name__}: {exc}", exc)
    if out.is_dir():  # else an IsADirectoryError traceback once the rows are read
        _fail(f"--out {out} is a folder; give the results file's path, e.g. {out / 'results.jsonl'}")
    if names_file(out, read.identity):  # else rows appended to it, its bad and blank lines dropped (the manifest
        _fail(f"--out {out} is the manifest; write the results to another file")  # read, not stat'ed again)
    try:
        output = read_output(out)  # the one read of the output (graph.batch: again only if it changes meanwhile)
        foreign = not_results(output)
    except OSError as exc:
        foreign = f"--out {out} cannot be read ({type(exc).__name__}: {exc})"
    if foreign:  # else a traceback, or a resume that drops the file's lines
        _fail(f"{foreign}; write the results to another file")
    commands.check_preset(preset)
    settings.ensure_parent_dirs()
    items, repeats, shared = drop_repeats(listed)
    if problem := not_json_lines(manifest, items):  # else a row per "line" of a video or CSV
        _fail(problem)
    if comments:
        typer.echo(f"{len(comments)} comment line(s) (#) skipped: line(s) " + ", ".join(map(str, comments[:5]))
                   + (" ..." if len(comments) > 5 else ""), err=True)
    for lines, what in ((repeats, "repeat an earlier one and are scored once"),
                        (shared, "repeat an earlier one's clip and instruction under another name or other fields: "
                                 "each gets its own row with that line's result")):
        if lines:
            typer.echo(f"{len(lines)} manifest line(s) {what}: " + ", ".join(lines[:5])
                       + (" ..." if len(lines) > 5 else ""), err=True)
    if warning := misplaced_paths(manifest, items, Path.cwd()):
        typer.echo(f"warning: {warning}", err=True)
    try:  # held until the batch ends (the system drops it with the process, however that ends)
        lock = lock_output(out)
    except OutputBusy as exc:
        _fail(str(exc), exc)
    except OSError as exc:  # a parent of --out is a file, or a folder it cannot write in
        _fail(f"cannot write --out {out}: {type(exc).__name__}: {exc}", exc)
    with lock, _said_on_ctrl_c(out) as stage:  # a Ctrl-C before the first row: what the file holds, exit 130
        if output.stamp != file_stamp(out):  # another batch wrote to it before this one held the lock
            output = read_output(out)
        if problem := other_scorer(output, scorer_of(settings)):  # before --retry-ineligible rewrites the file
            _fail(problem)
        moved = moved_rows(output, items, preset, draw)  # rows of clips moved, a link left: re-keyed (in memory)
        output = moved.output
        # whose a row of a bad or repeat line is: one view of the manifest names for the whole run, every question
        manifests = RowManifests(read)  # (graph.batch_manifest_file; a link re-pointed meanwhile changes no answer)
        goes = stale_repeats(output, manifests, items, stale_rows(manifest, items, preset, draw, manifests=manifests,
                                                                  retry_ineligible=retry_ineligible,
                                                                  scorer=scorer_of(settings), cwd=shell))
        kept = kept_rows(output, leaving=goes)  # the rows that stay: nothing is removed before the tools load
        others = others_copies(output, manifests, items, goes)  # another manifest's copies of rows that go: written again
        todo = [it for it in items if it["key"] not in kept]
        bad = sum(it["error"] is not None for it in todo)  # their rows are rewritten on every run (no model call)
        copies = sum(it.get("repeat_of") is not None for it in todo)  # they take an earlier line's result
        n, to_score = len(items) - bad, len(todo) - bad - copies
        typer.echo(f"{n} item{'' if n == 1 else 's'}, {len(items) - len(todo)} already in {out}, {to_score} to score"
                   + (f", {copies} to take an earlier line's result" if copies else "")
                   + (f", {bad} bad manifest line(s)" if bad else ""), err=True)
        left = {row["key"] for row in moved.left + moved.changed}  # named by moved_warning, not again as edited
        for warning in (edited_rows(output, items, preset, draw, lambda row: goes(row) or row.get("key") in left),
                        moved_warning(moved, out)):
            if warning:
                typer.echo(f"warning: {warning}", err=True)
        said = say_fixable(output)  # the rows a plain resume skips, or the flag leaves
        # the preset's tool models, loaded in the process that scores (worker processes load their own), only
        # when a clip is to be scored, and before any row goes: a tool that cannot load leaves the output alone
        live = to_score > 0 and any_input_fine(todo, settings.agent_config(preset).max_instruction_chars)
        # a wait of up to RAA_ENDPOINT_WAIT_S, then the tool models' load (a Ctrl-C there is said: _said_on_ctrl_c)
        if live:  # the endpoint, before a row per clip; none to score, or every clip missing
            commands.preflight_or_exit(settings)  # (graph.score_inputs): no wait
        tools = commands.loaded_tools(settings, preset) if live and processes == 1 else None
        stage.preparing = True  # from here a Ctrl-C may find the torn last line cut or the rows that go removed
        try:  # the output cannot be prepared or rewritten (disk full, a read-only file): one error line
            writer = RowWriter(out, scorer=scorer_of(settings))  # first: its failure leaves the file as it was
            retried = drop_rows(output, keeping(goes, others), current_fields(items), rewrite=moved.rekeyed > 0)
            # the rows of `output` (re-keyed ones with their new keys): a torn last line the writer cut goes here too;
            # the rows kept take their manifest line's fields as it is now; other manifests' copies of a row scored
            # again stay until their new copies replace them (drop_replaced)
        except OutputWriteError as exc:
            _fail(str(exc), exc)
        for line in (moved_lines(moved, out) + updated_lines(retried, out)
                     + (removed_lines(retried, out) if retry_ineligible else [])):
            typer.echo(line, err=True)
        if bad:  # said once the checks passed: a batch that stopped at them (exit 2) wrote nothing
            typer.echo(f"{bad} bad manifest line(s): their rows written again", err=True)
        if others:  # counted among this run's rows: said, or the closing counts exceed the items (as `bad`, once
            # the checks passed: said before them, a batch stopped there said it wrote them and that it wrote nothing)
            typer.echo(f"{len(others)} row(s) of other manifests sharing {out} copy a row this run scores again: "
                       "replaced by copies of its new row once it is written", err=True)
        stage.preparing = None  # the first row comes next: a Ctrl-C from here is the batch's own (`stopped`)
        try:  # a row that cannot be written (disk full, a read-only file): one error line, not a traceback
            scorable = write_repeats(write_bad_lines(todo, writer) + others, kept, writer)  # before the bar, which
            # counts the clips to score; a repeat of a line still to score is written with that line's row, and so
            # are other manifests' copies of a row this run scores again (graph.batch_repeat_rows)
            columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
            with Progress(*columns, console=_err) as progress:
                task = progress.add_task("scoring", total=len(scorable))
                writer.on_row = lambda: progress.advance(task)
                if scorable and processes > 1 and live:
                    run_batch_processes(scorable, writer, settings=settings, preset=preset, processes=processes,
                                        concurrency=concurrency, durability=settings.trace_durability, draw=draw,
                                        run_timeout_s=run_timeout or None,
                                        log=lambda line: progress.console.print(line, highlight=False, soft_wrap=True))
                elif scorable:
                    async def main() -> None:
                        async with open_async_saver(settings.traces_path) as saver:
                            agent = build_batch_agent(settings, preset, saver, commands.make_chat_model(settings), tools,
                                                      draw=draw)
                            await run_batch(agent, scorable, writer, concurrency, settings.trace_durability,
                                            settings.foreign_claim_max_age_s)

                    asyncio.run(main())
        except (BatchError, OutputWriteError, StoreError) as exc:  # no worker process left; a row that cannot be
            stopped(writer, out, exc)  # written; a trace database or stage cache that cannot be used
        except KeyboardInterrupt:  # with the failure of a row written before it or as the batch stopped, if any
            stopped(writer, out, writer.failed, interrupted=True)
        finally:  # however the batch ended: the copies written again replace the old ones (one row per key)
            ended, cut_short = drop_replaced_copies(output, others)  # read once at the end (None: not, or unreadable)
        try:
            cut = closing_lines_cut(writer, out)
        except KeyboardInterrupt:  # as they ended, before the check below: as one in them (a traceback, nothing said)
            cut = True
        if cut:  # every row is written: said in place of the lines a Ctrl-C cut
            typer.echo(f"interrupted as the batch ended: every row of this run is in {out} (the closing lines above "
                       "may be cut short)", err=True)
            raise typer.Exit(130)
        if cut_short:  # a Ctrl-C as the old copies went (said by drop_replaced_copies), after the closing lines
            raise typer.Exit(130)
        if writer.counts["ineligible"]:  # the rows the flag would score again, as a plain resume says them
            try:  # a Ctrl-C in the read (a slow mount) or the hint: every row is written and said
                if ended is None and not others:  # the file as the run left it, unless read for the copies
                    with contextlib.suppress(OSError):  # (unreadable now: the summary above stands alone)
                        ended = read_output(out)
                if ended is not None:
                    say_fixable(ended, said)  # what the start said, unchanged, not again
            except KeyboardInterrupt:  # every row is written and said: only the hint is cut short
                typer.echo(f"interrupted: every row of this run is in {out} (counted above)", err=True)
                raise typer.Exit(130) from None


class _Stage:
    """Where score-batch stands before its first row, for `_said_on_ctrl_c`: `preparing` False while nothing in the
    output has changed, True once it may have (a torn last line cut, `drop_rows`' rewrite), None once the rows come
    (their own Ctrl-C paths say it)."""

    preparing: bool | None = False


@contextlib.contextmanager
def _said_on_ctrl_c(out: Path) -> Iterator[_Stage]:
    """A Ctrl-C before score-batch's first row (the checks of the rows that go, which ask the file system of each
    clip; the endpoint wait; the tools' load; the output prepared for rows) says what `out` holds and that the same
    command runs the batch, exit 130 (it ended with a traceback or nothing said). No row is lost there: the cut of a
    torn last line and `drop_rows`' rewrite in one rename leave the rows as they were or without the rows to score
    again."""
    stage = _Stage()
    try:
        yield stage
    except KeyboardInterrupt:
        if stage.preparing is None:
            raise
        held = ("is as it was (no row written or removed)" if not stage.preparing else
                "holds its rows as they were, or without its torn last line and the rows this run scores again "
                "(no row written; none lost)")
        typer.echo(f"interrupted before any clip was scored: {out} {held}; the same command runs the batch",
                   err=True)
        raise typer.Exit(130) from None


def _fail(message: str, cause: BaseException | None = None) -> NoReturn:
    """score-batch's end on a configuration or input error: "error: `message`" and exit 2 (from `cause`, the error
    behind it, where there is one)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2) from cause
