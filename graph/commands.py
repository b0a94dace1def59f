"""Agent CLI commands (`raa score`, `raa score-batch`; `raa serve-reward` is in graph/serve_command.py, `raa runs`
and `raa trace` in graph/trace_commands.py); registered in graph/cli.py.

This is the edge: settings come from `BackboneSettings.from_env()` here and nowhere deeper. Without a
configured endpoint the score commands exit with status 2 and say how to connect one; they never
produce a reward without a model.

Decisions where the issue was silent:
- Exit codes: 0 = a result was produced (scored or zero); 3 = `raa score` produced an ineligible
  result (reward None, reasons printed); 2 = configuration / input error; 1 = unknown run id. A result
  whose trace could not be saved (`graph.api.unsaved_trace`, `trace_saved` false) is still a result: exit 0 (3 when
  ineligible), its last reason says why, and stderr says "trace not saved" instead of the `raa trace` hint.
- `raa score --json` prints only the RewardResult JSON on stdout (the trace hint goes to stderr).
- `raa score` checks the endpoint first, as score-batch does (graph/endpoint.py): exit 2, not 3 after the retries;
  before it, its clip path and instruction (graph/score_inputs.py): a bad one is its ineligible result (3) at once.
- `score-batch`: rows, resume keys and bad manifest lines are described in `graph.batch`; its summary counts
  the rows written whose trace was not saved (`RowWriter.unsaved_traces`); runs use an
  AsyncSqliteSaver as checkpointer, so rows are appended as runs finish and traces stay readable.
  `--processes N` (N > 1) spreads the runs over worker processes (`graph.batch_procs`); those build
  the chat model with `graph.backbone.default_chat_model`, not with `make_chat_model`.
- The agent's nodes are async, so `--stream` streams the node updates (`graph.api.arun_agent`'s `on_update`)
  and prints one line per node update on stderr. It is the same run as without `--stream` (trace look-up,
  run-id claim in the trace database, release): it ran `agent.astream` itself and claimed nothing.
- The CLI builds the Backbone itself (`Backbone.from_settings`) so the on-disk stage cache
  (`RAA_CACHE_PATH`) is used and keyed by `RAA_MODEL`.
- `make_chat_model` is the seam tests monkeypatch to inject a scripted model.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from langchain_core.language_models import BaseChatModel
from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from graph.backbone import default_chat_model
from graph.endpoint import preflight
from graph.reward_format import reward_text
from graph.score_inputs import any_input_fine, input_problem
from graph.settings import BackboneSettings, SettingsError
from graph.trace_text import describe_update, printable
from graph.tracing import open_async_saver

if TYPE_CHECKING:  # pragma: no cover
    from tools.settings import ToolSettings

# markup and emoji codes off: reasons ("[assess] timeout: ..."), decisions, paths are data; rich would read
# "[assess]" as a style and ":x:" as an emoji (their control characters: graph.trace_text.printable)
_out = Console(markup=False, emoji=False)
_err = Console(stderr=True, markup=False, emoji=False)
RUNS_FULL_WIDTH = 110
"""Run tables (`raa runs`, the demo's, eval's Table 2) print every column with full timestamps on consoles
at least this wide; narrower ones get a compact table (no step count, month-day hour:minute, no vertical
rules) with only the video folding."""


def run_table(title: str, width: int) -> tuple[Table, bool]:
    """(table, full) for a list of runs (`raa runs`, the demo's scores): the ruled layout on consoles at least
    RUNS_FULL_WIDTH wide (full=True), else a compact one without vertical rules or edge padding."""
    full = width >= RUNS_FULL_WIDTH
    table = Table(title=title, box=box.HEAVY_HEAD if full else box.SIMPLE_HEAD, pad_edge=full,
                  collapse_padding=not full)
    return table, full


def make_chat_model(settings: BackboneSettings) -> BaseChatModel:
    """The chat model the CLI scores with (tests replace this function)."""
    return default_chat_model(settings)


def settings_or_exit(require_endpoint: bool) -> BackboneSettings:
    try:
        settings = BackboneSettings.from_env()
    except SettingsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if require_endpoint and not settings.configured:
        typer.echo(f"error: {settings.describe_missing()}", err=True)  # unwrapped: commands stay copyable
        raise typer.Exit(2)
    return settings


def check_preset(preset: str) -> None:
    from graph import AgentConfig  # deferred: the agent graph is heavy to import

    try:
        AgentConfig(preset=preset)  # type: ignore[arg-type]
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


def _result_table(result: Any) -> Table:
    table = Table(title=f"run {result.run_id}", show_header=False)
    reward = "⊥ (ineligible)" if result.reward is None else reward_text(result.reward)
    rows = [("reward", reward), ("status", result.status), ("preset", result.preset)]
    rows += [(k, "-" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v)))
             for k, v in (("T", result.T), ("P", result.P), ("V", result.V), ("failure", result.failure),
                          ("unverifiable", result.unverifiable))]
    rows += [("reasons", printable("\n".join(result.reasons)) or "-"),
             ("usage", " ".join(f"{k}={v}" for k, v in result.usage.items()))]
    for k, v in rows:
        table.add_row(k, v)
    return table


def score_command(
    video: Path = typer.Argument(..., help="Video file to score."),
    instruction: str = typer.Option(..., "--instruction", "-i", help="Task instruction the robot was given."),
    preset: str = typer.Option("full", "--preset", help="Agent preset (paper Table 2), e.g. full, direct."),
    json_out: bool = typer.Option(False, "--json", help="Print the RewardResult as JSON only."),
    stream: bool = typer.Option(False, "--stream", help="Print each node's update as it happens."),
    draw: int = typer.Option(0, "--draw", min=0, help="Stage-cache draw: another number samples the "
                             "backbone's answers anew (RAA_TEMPERATURE > 0) instead of reusing cached ones."),
) -> None:
    """Score one video against an instruction with the reward agent."""
    from graph.api import clip_path, new_run_id, trace_saved  # deferred: the agent graph is heavy to import

    settings = settings_or_exit(require_endpoint=True)
    settings.ensure_parent_dirs()
    check_preset(preset)
    clip = clip_path(video)  # as the run gets and names it (a symlink loop: made absolute only, no traceback)
    if problem := input_problem(clip, instruction, settings.agent_config(preset).max_instruction_chars):
        typer.echo(f"error: {problem}", err=True)  # at once, no wait first: the run ends ineligible at it
    else:  # a wrong endpoint: exit 2 with the problem, not exit 3 after every retry
        preflight_or_exit(settings)
    tools = None if problem else loaded_tools(settings, preset)  # a tool that cannot load: exit 2, no model call
    run_id = new_run_id()
    result = asyncio.run(_score_one(settings, preset, clip, instruction, run_id, stream, draw, tools))
    if json_out:
        typer.echo(result.model_dump_json())
    else:
        _out.print(_result_table(result))
    typer.echo(_trace_hint(result.run_id or run_id, trace_saved(result), settings.traces_path), err=True)
    if result.status == "ineligible":
        raise typer.Exit(3)


def _trace_hint(run_id: str, saved: bool, traces_path: str) -> str:
    """Where `raa score` says the run's trace is: the `raa trace` command, or why there is none to read (not
    saved; kept in memory only, gone with this process, where `raa trace` would find no database)."""
    if not saved:
        return "trace not saved: see the last reason"
    if traces_path == ":memory:":
        return "trace kept in memory only (RAA_TRACES_PATH=:memory:): `raa trace` cannot read it"
    return f"trace: raa trace {run_id}"


async def _score_one(settings: BackboneSettings, preset: str, video: str, instruction: str, run_id: str,
                     stream: bool, draw: int = 0, tools: Any = None) -> Any:
    from graph.api import arun_agent
    from graph.batch import build_batch_agent

    async with open_async_saver(settings.traces_path) as saver:
        agent = build_batch_agent(settings, preset, saver, make_chat_model(settings), tools, draw=draw)
        return await arun_agent(agent, video, instruction, run_id, preset, durability=settings.trace_durability,
                                on_update=(lambda node, update: typer.echo(describe_update(node, update), err=True))
                                if stream else None,
                                claim_max_age_s=settings.foreign_claim_max_age_s)


# ---------------------------------------------------------------------------------------------- batch
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
        OutputBusy,
        OutputWriteError,
        RowWriter,
        build_batch_agent,
        comment_lines,
        drop_repeats,
        file_stamp,
        kept_rows,
        lock_output,
        misplaced_paths,
        not_json_lines,
        not_results,
        other_scorer,
        read_manifest,
        read_output,
        run_batch,
        scorer_of,
        write_bad_lines,
        write_repeats,
    )
    from graph.batch_resume import (
        current_fields,
        drop_rows,
        edited_rows,
        fixable_lines,
        fixable_rows,
        removed_lines,
        stale_repeats,
        stale_rows,
        updated_lines,
    )

    settings = settings_or_exit(require_endpoint=True)
    if manifest.is_dir():  # there, but no file: "not found" misled
        inside = manifest / "manifest.jsonl"
        typer.echo(f"error: manifest {manifest} is a folder; give the manifest file's path"
                   + (f", e.g. {inside}" if inside.is_file() else ""), err=True)
        raise typer.Exit(2)
    if not manifest.is_file():
        typer.echo(f"error: manifest not found: {manifest}", err=True)
        raise typer.Exit(2)
    if out.is_dir():  # else an IsADirectoryError traceback once the rows are read
        typer.echo(f"error: --out {out} is a folder; give the results file's path, e.g. {out / 'results.jsonl'}",
                   err=True)
        raise typer.Exit(2)
    if out.exists() and out.samefile(manifest):  # else rows appended to it, its bad and blank lines dropped
        typer.echo(f"error: --out {out} is the manifest; write the results to another file", err=True)
        raise typer.Exit(2)
    try:
        output = read_output(out)  # the one read of the output (graph.batch: again only if it changes meanwhile)
        foreign = not_results(output)
    except OSError as exc:
        foreign = f"--out {out} cannot be read ({type(exc).__name__}: {exc})"
    if foreign:  # else a traceback, or a resume that drops the file's lines
        typer.echo(f"error: {foreign}; write the results to another file", err=True)
        raise typer.Exit(2)
    check_preset(preset)
    settings.ensure_parent_dirs()
    try:
        items, repeats, shared = drop_repeats(read_manifest(manifest, preset, draw))
        comments = comment_lines(manifest)
    except OSError as exc:  # unreadable (permissions), or gone since the check above
        typer.echo(f"error: cannot read manifest {manifest}: {type(exc).__name__}: {exc}", err=True)
        raise typer.Exit(2) from exc
    if problem := not_json_lines(manifest, items):  # else a row per "line" of a video or CSV
        typer.echo(f"error: {problem}", err=True)
        raise typer.Exit(2)
    if comments:
        typer.echo(f"{len(comments)} comment line(s) (#) skipped: line(s) " + ", ".join(map(str, comments[:5]))
                   + (" ..." if len(comments) > 5 else ""), err=True)
    for lines, what in ((repeats, "repeat an earlier one and are scored once"),
                        (shared, "repeat an earlier one's clip and instruction with other fields: each gets its own "
                                 "row with that line's result")):
        if lines:
            typer.echo(f"{len(lines)} manifest line(s) {what}: " + ", ".join(lines[:5])
                       + (" ..." if len(lines) > 5 else ""), err=True)
    if warning := misplaced_paths(manifest, items, Path.cwd()):
        typer.echo(f"warning: {warning}", err=True)
    try:  # held until the batch ends (the system drops it with the process, however that ends)
        lock = lock_output(out)
    except OutputBusy as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    except OSError as exc:  # a parent of --out is a file, or a folder it cannot write in
        typer.echo(f"error: cannot write --out {out}: {type(exc).__name__}: {exc}", err=True)
        raise typer.Exit(2) from exc
    with lock:
        if output.stamp != file_stamp(out):  # another batch wrote to it before this one held the lock
            output = read_output(out)
        if problem := other_scorer(output, scorer_of(settings)):  # before --retry-ineligible rewrites the file
            typer.echo(f"error: {problem}", err=True)
            raise typer.Exit(2)
        goes = stale_repeats(output, items, stale_rows(manifest, items, preset, draw, retry_ineligible=retry_ineligible,
                                                       scorer=scorer_of(settings)))
        kept = kept_rows(output, leaving=goes)  # the rows that stay: nothing is removed before the tools load
        todo = [it for it in items if it["key"] not in kept]
        bad = sum(it["error"] is not None for it in todo)  # their rows are rewritten on every run (no model call)
        copies = sum(it.get("repeat_of") is not None for it in todo)  # they take an earlier line's result
        n, to_score = len(items) - bad, len(todo) - bad - copies
        typer.echo(f"{n} item{'' if n == 1 else 's'}, {len(items) - len(todo)} already in {out}, {to_score} to score"
                   + (f", {copies} to take an earlier line's result" if copies else "")
                   + (f", {bad} bad manifest line(s)" if bad else ""), err=True)
        if warning := edited_rows(output, items, preset, draw):
            typer.echo(f"warning: {warning}", err=True)
        if not retry_ineligible:  # the rows a plain resume skips though the flag would score them again
            for line in fixable_lines(fixable_rows(output, manifest, items, preset, draw, scorer_of(settings)), out):
                typer.echo(line, err=True)
        # the preset's tool models, loaded in the process that scores (worker processes load their own), only
        # when a clip is to be scored, and before any row goes: a tool that cannot load leaves the output alone
        live = to_score > 0 and any_input_fine(todo, settings.agent_config(preset).max_instruction_chars)
        if live:  # the endpoint, before a row per clip; none to score, or every clip missing (graph.score_inputs): no wait
            preflight_or_exit(settings)
        tools = loaded_tools(settings, preset) if live and processes == 1 else None
        try:  # the output cannot be prepared or rewritten (disk full, a read-only file): one error line
            writer = RowWriter(out, scorer=scorer_of(settings))  # first: its failure leaves the file as it was
            retried = drop_rows(output, goes, current_fields(items))  # the rows of `output`: a torn last line the
            # writer cut goes here too; the rows kept take their manifest line's fields as it is now
        except OutputWriteError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from exc
        for line in updated_lines(retried, out) + (removed_lines(retried, out) if retry_ineligible else []):
            typer.echo(line, err=True)
        if bad:  # said once the checks passed: a batch that stopped at them (exit 2) wrote nothing
            typer.echo(f"{bad} bad manifest line(s): their rows written again", err=True)
        try:  # a row that cannot be written (disk full, a read-only file): one error line, not a traceback
            scorable = write_repeats(write_bad_lines(todo, writer), kept, writer)  # before the bar, which counts
            # the clips to score; a repeat of a line still to score is written with that line's row
            columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
            with Progress(*columns, console=_err) as progress:
                task = progress.add_task("scoring", total=len(scorable))
                writer.on_row = lambda: progress.advance(task)
                if scorable and processes > 1 and live:
                    from graph.batch_procs import BatchError, run_batch_processes

                    try:
                        run_batch_processes(scorable, writer, settings=settings, preset=preset, processes=processes,
                                            concurrency=concurrency, durability=settings.trace_durability, draw=draw,
                                            run_timeout_s=run_timeout or None,
                                            log=lambda line: progress.console.print(line, highlight=False, soft_wrap=True))
                    except BatchError as exc:
                        typer.echo(f"error: {exc}", err=True)
                        raise typer.Exit(2) from exc
                elif scorable:
                    async def main() -> None:
                        async with open_async_saver(settings.traces_path) as saver:
                            agent = build_batch_agent(settings, preset, saver, make_chat_model(settings), tools,
                                                      draw=draw)
                            await run_batch(agent, scorable, writer, concurrency, settings.trace_durability,
                                            settings.foreign_claim_max_age_s)

                    asyncio.run(main())
        except OutputWriteError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from exc
        except KeyboardInterrupt:  # Ctrl-C: what the rows written so far cost still gets said
            _closing_lines(writer, out)
            typer.echo("interrupted: clips whose run had not finished got no row; the same command resumes the batch", err=True)
            raise typer.Exit(130) from None
        _closing_lines(writer, out)
        if writer.counts["ineligible"]:  # the rows the flag would score again, as a plain resume says them
            try:  # the file as the run left it (unreadable now: the summary above stands alone)
                ended = read_output(out)
            except OSError:
                ended = None
            if ended is not None:
                for line in fixable_lines(fixable_rows(ended, manifest, items, preset, draw, scorer_of(settings)), out):
                    typer.echo(line, err=True)


def _closing_lines(writer: Any, out: Path) -> None:
    """score-batch's closing line (this invocation's rows by status and their model usage: what the batch cost)
    and, under it, one line per failing stage and fault kind, and the rows whose trace was not saved."""
    usage = " ".join(f"{k}={v}" for k, v in writer.usage.items())
    typer.echo(" ".join(f"{k}={v}" for k, v in writer.counts.items()) + (f"  usage: {usage}" if usage else "")
               + f"  -> {out}", err=True)
    for kind, (n, first) in sorted(writer.faults.items(), key=lambda kv: -kv[1][0]):
        typer.echo(f"  ineligible ({kind}): {n}, first: {first[:300]}", err=True)
    if writer.unsaved_traces:
        typer.echo(f"  traces not saved: {writer.unsaved_traces} of {sum(writer.counts.values())} row(s) (their "
                   "results stand; `raa trace` cannot show them, their last reason says why)", err=True)


def preflight_or_exit(settings: BackboneSettings) -> None:
    """The endpoint pre-flight (graph/endpoint.py); its problem is one error line and exit 2."""
    if problem := preflight(settings):
        typer.echo(f"error: {problem}", err=True)
        raise typer.Exit(2)


def loaded_tools(settings: BackboneSettings, preset: str, tool_settings: ToolSettings | None = None) -> Any:
    """A Toolbox from `tool_settings` (None: the `RAA_*` tool settings, read here) with the preset's models
    loaded (exit 2 naming the tool that cannot load): for commands that would otherwise find out in every run,
    each one ineligible."""
    from graph.context import loaded_toolbox
    from tools.errors import ToolFault
    from tools.settings import ToolSettings

    try:
        tools = ToolSettings.from_env() if tool_settings is None else tool_settings
        return loaded_toolbox(tools, settings.agent_config(preset))
    except ToolFault as exc:
        avoid = {"surprise": "no_wmreward (no V-JEPA 2)", "motion": "no_motion (no CoTracker3)"}.get(exc.tool)
        typer.echo(f"error: {exc}" + (f"\nscore with a preset without that tool, e.g. --preset {avoid}; "
                                      "`raa doctor` checks the tool settings" if avoid else ""), err=True)
        raise typer.Exit(2) from exc
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
