"""`raa runs` and `raa trace`: reading the trace database (graph/tracing.py) at the command line;
registered in graph/cli.py. The trace database comes from `--db` or, without it, from the settings
(`RAA_TRACES_PATH`): the edge, as in graph/commands.py. Exit status 1 for an unknown run id, 2 for a run whose
checkpoint cannot be decoded (`graph.tracing.UnreadableRunError`; `raa runs` lists the others and names it).
`--json` output is strict JSON: a NaN or infinite number in a run's state (an evidence tool's value, say) is
written as null (`tools.jsonl.strict_dumps`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from graph.claimed_runs import CLAIM_STATUSES, unsaved_runs
from graph.commands import run_table
from graph.config import recorded_settings
from graph.reward_format import reward_text
from graph.trace_text import printable, start_time, step_row
from graph.tracing import (
    RUN_STATUSES,
    RunNotFoundError,
    RunTrace,
    UnreadableRunError,
    last_result,
    list_runs,
    no_database,
    open_saver,
    read_trace,
)
from tools.jsonl import strict_dumps

# markup and emoji codes off: reasons, decisions and paths are data (rich would read "[assess]" as a style and
# ":x:" as an emoji); their control characters are written out (`printable`)
_out = Console(markup=False, emoji=False)
TRACE_TABLE_MIN_WIDTH = 140
"""`raa trace` prints a table on consoles at least this wide, one block per step on narrower ones (120 left the
decision column about ten characters once each step's start time had its own column)."""
VIDEO_MIN, WHY_MIN = 8, 20
"""`raa runs`: the narrowest video and "why" columns; the "why" is left out (not cropped) where it has no room."""


def traces_path_option(db: Path | None) -> Path:
    """`--db` / `--traces`, or RAA_TRACES_PATH: only that setting (a bad backbone setting made `raa runs`, `raa
    report` and `raa eval report` exit 2); exit 2 naming a bad value."""
    if db is not None:
        return db
    from graph.settings import SettingsError, traces_path_from_env

    try:
        return Path(traces_path_from_env(os.environ))
    except SettingsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


def claim_age_option() -> float:
    """RAA_FOREIGN_CLAIM_MAX_AGE_S, as `raa prune` and claiming read it: a claim of another host older than this is a
    run that died, not one running (`graph.run_claims`); exit 2 naming a bad value."""
    from graph.settings import SettingsError, claim_age_from_env

    try:
        return claim_age_from_env(os.environ)
    except SettingsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


def runs_command(
    limit: int = typer.Option(50, "--limit", min=1, help="Show at most this many runs (newest first)."),
    status: str | None = typer.Option(None, "--status", help="Only runs with this status: "
                                      f"{', '.join(RUN_STATUSES + CLAIM_STATUSES)} (running: in flight; died: killed before its trace was saved)."),
    preset: str | None = typer.Option(None, "--preset", help="Only runs of this preset."),
    json_out: bool = typer.Option(False, "--json", help="One JSON object per run (JSON lines) instead of a table."),
    db: Path | None = typer.Option(None, "--db", "--traces", help="Trace database (default RAA_TRACES_PATH)."),
) -> None:
    """List traced agent runs (with why a run is zero or ineligible, on a wide terminal), and those claimed with no
    trace yet (`graph.claimed_runs`)."""
    if status is not None and status not in RUN_STATUSES + CLAIM_STATUSES:
        typer.echo(f"error: --status must be one of {', '.join(RUN_STATUSES + CLAIM_STATUSES)}, got {status!r}",
                   err=True)
        raise typer.Exit(2)
    path, claim_max_age_s = traces_path_option(db), claim_age_option()
    if not path.exists():
        typer.echo(no_database(path), err=True)
        return
    unreadable: list[str] = []
    saver = open_saver(path, read_only=True)
    unsaved = [] if preset is not None else unsaved_runs(saver, status, claim_max_age_s)
    traced = [] if status == "died" else list_runs(saver, limit=limit, status=status, preset=preset,  # never saved
                                                   unreadable=unreadable, claim_max_age_s=claim_max_age_s)
    runs = sorted(unsaved + traced, key=lambda run: run.updated[:19], reverse=True)[:limit]  # newest first
    if unreadable:  # the others are listed: one damaged checkpoint does not hide them (graph.tracing)
        typer.echo(f"warning: {len(unreadable)} run(s) could not be read: {', '.join(unreadable[:5])}"
                   f"{' ...' if len(unreadable) > 5 else ''} (`raa trace RUN_ID` says why)", err=True)
    if not runs:  # a database just created, or with every run pruned (the table's widths need a row)
        wanted = ", ".join(f"{k} {v}" for k, v in (("status", status), ("preset", preset)) if v)
        typer.echo(f"no runs with {wanted} in {path}" if wanted else f"no runs in {path}", err=True)
        return
    if json_out:
        for run in runs:
            overrides, server = _settings(run)
            typer.echo(strict_dumps({"run_id": run.run_id, "updated": run.updated, "preset": run.preset,
                                   "overrides": overrides, "server": server, "status": run.status, "reward": run.reward, "reasons": run.reasons,
                                   "video": run.values.get("video"), "instruction": run.values.get("instruction"),
                                   "steps": len(run.steps)}, default=str))
        return
    table, full = run_table(f"runs in {path}", _out.width)
    heads = ("run id", "updated", "preset", "status", "reward") + (("steps",) if full else ())
    rows = [_run_cells(run, full) for run in runs]
    videos = [printable(Path(str(run.values["video"])).name) if run.values.get("video") else "-" for run in runs]
    reasons = [printable("; ".join(run.reasons)) for run in runs]
    reasons = [reason[:160] + ("..." if len(reason) > 160 else "") for reason in reasons]
    room = _room(heads, rows, _out.width)
    why = full and any(reasons) and room >= VIDEO_MIN + WHY_MIN
    # the run id is what `raa trace` / `raa report` take: never cut short. The video name is cut with an
    # ellipsis (each cell one line); only the "why" column folds
    table.add_column("run id", no_wrap=True, min_width=max((len(r.run_id) for r in runs), default=6))
    for col in heads[1:]:
        table.add_column(col, no_wrap=True)
    video_width, why_width = _split(room, max(map(len, ["video", *videos])), max(map(len, reasons))) if why else \
        (None, None)
    table.add_column("video", overflow="ellipsis", min_width=VIDEO_MIN, width=video_width)
    if why:
        table.add_column("why", overflow="fold", min_width=WHY_MIN, width=why_width)
    for cells, video, reason in zip(rows, videos, reasons, strict=True):
        table.add_row(*cells, Text(video, no_wrap=True, overflow="ellipsis"), *((reason,) if why else ()))
    _out.print(table)


def _run_cells(run: RunTrace, full: bool) -> list[str]:
    """The no-wrap cells of a run's row in `raa runs`: run id, updated, preset, status, reward (and steps)."""
    stamp = run.updated[:19].replace("T", " ")
    reward = reward_text(run.reward)
    cells = [run.run_id, stamp if full else stamp[5:16], run.preset + ("+" if _settings(run)[0] else ""), run.status,
             reward]
    return cells + [str(len(run.steps))] if full else cells


def _settings(run: RunTrace) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's overrides of its preset ("full+" when any) and its server settings, which are not overrides
    (`graph.config.recorded_settings`: older runs recorded those among their overrides)."""
    return recorded_settings(run.overrides, run.values.get("server") or (run.result or {}).get("server") or {})


def _preset_text(trace: RunTrace) -> str:
    """The preset in `raa trace`'s header: with the settings the run overrode, e.g. "full+ (audit=False)", and
    its server settings, e.g. "full  server: inspect_mode=plan, coordinates=pixels"."""
    overrides, server = _settings(trace)
    extra = ", ".join(f"{k}={v}" for k, v in overrides.items())
    text = "-" if not trace.preset else f"{trace.preset}+ ({printable(extra)})" if extra else trace.preset
    return text + (f"  server: {printable(', '.join(f'{k}={v}' for k, v in server.items()))}" if server else "")

def _room(heads: tuple[str, ...], rows: list[list[str]], width: int) -> int:
    """The characters the full runs table leaves for the video and "why" columns' text beside its no-wrap
    columns (`heads`, cells `rows`) at their widest, borders and padding included."""
    widest = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(heads)]
    columns = len(heads) + 2  # + video, why
    return width - sum(widest) - 3 * columns - 1


def _split(room: int, video: int, why: int) -> tuple[int | None, int | None]:
    """Fixed (video, why) widths sharing `room` (at least VIDEO_MIN + WHY_MIN), for the longest video name
    `video` and reason `why`; (None, None) when both fit whole. Left to rich, the two shrank evenly and the
    "why" went under its 20 characters, which rich then kept by cropping the table's right side."""
    if video + why <= room:
        return None, None
    why_width = max(WHY_MIN, min(why, room // 2), room - video)
    return room - why_width, why_width


def _before_fork(saver: Any, run_id: str) -> dict[str, Any] | None:
    """The result a run reached before its latest checkpoint, a time-travel fork not resumed yet (`last_result`);
    None when it never finished, or when an older checkpoint cannot be decoded (the note is left out: the run's
    latest checkpoint was read)."""
    try:
        return last_result(saver, run_id)
    except UnreadableRunError:
        return None


def trace_command(
    run_id: str = typer.Argument(..., help="Run id (thread id) printed by `raa score` or `raa runs`."),
    json_out: bool = typer.Option(False, "--json", help="Print the run's whole traced state as one JSON object."),
    db: Path | None = typer.Option(None, "--db", "--traces", help="Trace database (default RAA_TRACES_PATH)."),
) -> None:
    """Print every step of one agent run in order."""
    path, claim_max_age_s = traces_path_option(db), claim_age_option()
    if not path.exists():
        typer.echo(f"error: no traced run with id {run_id!r}: {no_database(path)}", err=True)
        raise typer.Exit(1)
    try:
        saver = open_saver(path, read_only=True)
        trace = read_trace(saver, run_id, claim_max_age_s)
    except RunNotFoundError as exc:
        typer.echo(f"error: {exc} (in {path})", err=True)
        raise typer.Exit(1) from exc
    except UnreadableRunError as exc:  # it is there, but its checkpoint cannot be decoded
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    earlier = _before_fork(saver, run_id) if trace.result is None else None
    if json_out:  # steps, contract, assessments, exchanges, faults, result: everything the run checkpointed
        typer.echo(strict_dumps({"run_id": trace.run_id, "updated": trace.updated, "status": trace.status,
                               "reward": trace.reward, "values": trace.values}, default=str))
        return
    v = trace.values
    _out.print(f"run {run_id}  video={printable(v.get('video', '-'))}  preset={_preset_text(trace)}  "
               f"status={trace.status}  reward={reward_text(trace.reward)}", highlight=False, soft_wrap=True)
    typer.echo(f"instruction: {printable(str(v.get('instruction', ''))[:300])}")
    # the result's usage, or an incomplete run's so far: `attempts` above `calls` says requests went unanswered
    if usage := (trace.result or {}).get("usage") or v.get("usage"):
        typer.echo("usage: " + " ".join(f"{k}={n}" for k, n in usage.items()))
    if earlier is not None:
        typer.echo(f"note: the latest checkpoint is a time-travel fork not resumed yet; before it the run finished: "
                   f"status={earlier.get('status')} reward={reward_text(earlier.get('reward'))} (resume the fork to "
                   "finish it; the steps below are the fork's)")
    if first := next((s.get("started") for s in trace.steps if s.get("started")), None):  # steps show times of day
        typer.echo(f"started: {printable(start_time(first, date=True))} UTC")
    rows = [step_row(i, step) for i, step in enumerate(trace.steps)]
    if _out.width >= TRACE_TABLE_MIN_WIDTH:
        table = Table(show_lines=True)
        columns = ("#", "node", "started", "duration", "decision", "frames", "crops", "tools", "audit", "gate")
        for col in columns:  # short fixed columns stay on one line; the long ones fold, losing nothing
            table.add_column(col, no_wrap=col in ("#", "node", "started", "duration"), overflow="fold")
        for row in rows:
            table.add_row(*(row[c] for c in columns))
        _out.print(table)
    else:  # ten columns do not fit: one block per step, a field per line (pipes, narrow terminals)
        for row in rows:
            typer.echo("  ".join(filter(None, (f"[{row['#']}] {row['node']}", row["started"], row["duration"]))))
            for field in ("decision", "frames", "crops", "tools", "audit", "gate"):
                for k, line in enumerate(row[field].splitlines()):
                    typer.echo(f"    {field if k == 0 else '':9s} {line}")
    for fault in v.get("faults") or []:
        typer.echo(printable(f"fault: {fault.get('stage')}: {fault.get('kind')}: {fault.get('message')}"))
    if trace.result:
        for reason in trace.result.get("reasons") or []:
            typer.echo(f"reason: {printable(reason)}")
    else:  # no result to carry them (a finished run's reasons end with its notes): those written so far
        if trace.claim is not None:  # in flight (graph.tracing.claim_text)
            typer.echo(f"running: {printable(trace.claim[1])}")
        for note in v.get("notes") or []:
            typer.echo(f"note: {printable(note)}")
