"""`raa prune`: the command line of trace retention (`graph.retention` selects, deletes and vacuums).

Split from graph.retention by concern (the command's options, messages and exit codes here; what is selected and
how it is deleted there, whose module docstring holds the decisions).

Decision where the issue was silent: with no trace database at the path, prune says so as `raa runs` / `raa
trace` / `raa report` do (`graph.tracing.no_database`: the folder a relative path was read from, and
`--traces PATH` / `RAA_TRACES_PATH`); it said only "(no runs yet)", which read as if the runs were lost when
it ran from another folder.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

import typer

from graph.retention import (
    count_runs,
    delete_runs,
    file_bytes,
    parse_cutoff,
    select_runs,
    stage_cache_entries,
    vacuum_and_say,
    vacuum_traces,
)
from graph.run_claims import FOREIGN_CLAIM_MAX_AGE_S
from graph.tracing import RUN_STATUSES, no_database


def _option_cutoff(option: str, text: str, now: datetime) -> datetime:
    try:
        return parse_cutoff(text, now)
    except ValueError as exc:
        raise ValueError(f"{option}: {exc}") from None


def vacuum_only(traces: Path, cache: str | Path | None, *, dry_run: bool,
                claim_max_age_s: float = FOREIGN_CLAIM_MAX_AGE_S) -> None:
    """`raa prune --vacuum` without a criterion: shrink the trace database and the stage cache (when on), each
    that exists, and say their sizes; nothing is deleted, so nothing is asked. Exit 2, nothing vacuumed, while
    runs are in flight (`vacuum_traces`, first)."""
    for path, what, setting in ((traces, "trace database", "RAA_TRACES_PATH"),
                                (cache, "stage cache", "RAA_CACHE_PATH, or off")):
        if path is None:
            typer.echo("the stage cache is off (RAA_CACHE_PATH); nothing to vacuum there", err=True)
        elif not Path(path).exists():
            typer.echo(no_database(Path(path)) if what == "trace database" else f"no {what} at {path} (none yet)",
                       err=True)
        elif dry_run:
            typer.echo(f"{path}: {file_bytes(path) / 2**20:.1f} MiB")
        elif what != "trace database":
            vacuum_and_say(path, what, setting)
        elif (why := vacuum_traces(path, claim_max_age_s)) is not None:  # first: the cache is not vacuumed
            typer.echo(f"error: {why}", err=True)
            raise typer.Exit(2)
    if dry_run:
        typer.echo("dry run: nothing vacuumed")


class _PruneSettings(NamedTuple):
    """The settings `raa prune` uses (RAA_CACHE_PATH, RAA_FOREIGN_CLAIM_MAX_AGE_S; the trace path apart)."""

    cache_path: str | None
    foreign_claim_max_age_s: float


def prune_command(
    keep: int | None = typer.Option(None, "--keep", min=0, help="Spare the newest N runs."),
    before: str | None = typer.Option(None, "--before", help="Only runs last updated before this: an age "
                                      "(30m, 12h, 7d, 2w) or an ISO date / date and time (UTC)."),
    status: str | None = typer.Option(None, "--status", help=f"Only runs with this status: {', '.join(RUN_STATUSES)}."),
    cache: bool = typer.Option(False, "--cache", help="Delete every stage cache entry (RAA_CACHE_PATH); "
                               "not with --cache-before."),
    cache_before: str | None = typer.Option(None, "--cache-before", help="Delete the stage cache entries stored "
                                            "before this (an age or date, as --before); runs are not touched."),
    vacuum_files: bool = typer.Option(False, "--vacuum", help="Shrink the files afterwards; alone, only shrink "
                                      "them (no other process may have them open)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be deleted, and delete nothing."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    db: Path | None = typer.Option(None, "--db", "--traces", help="Trace database (default RAA_TRACES_PATH)."),
) -> None:
    """Delete traced runs (and with --cache stage cache entries) to keep the databases small."""
    from graph.settings import SettingsError, cache_path_from_env, claim_age_from_env, traces_path_from_env

    try:  # only the settings prune uses: a bad backbone setting (RAA_MAX_RETRIES=abc) made it exit 2
        path = db if db is not None else Path(traces_path_from_env(os.environ))
        settings = _PruneSettings(cache_path_from_env(os.environ), claim_age_from_env(os.environ))
        now = datetime.now(UTC)
        cutoff = None if before is None else _option_cutoff("--before", before, now)
        cache_cutoff = None if cache_before is None else _option_cutoff("--cache-before", cache_before, now)
        if cache and cache_before is not None:  # only the date limit applied, silently (the README: one or the other)
            raise ValueError("--cache deletes every stage cache entry, --cache-before WHEN only older ones: not both")
        if status is not None and status not in RUN_STATUSES:
            raise ValueError(f"--status must be one of {', '.join(RUN_STATUSES)}, got {status!r}")
    except (SettingsError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    runs_wanted = keep is not None or before is not None or status is not None
    cache = cache or cache_before is not None
    if not runs_wanted and not cache and vacuum_files:  # deletes nothing: no criterion, no confirmation
        vacuum_only(path, settings.cache_path, dry_run=dry_run, claim_max_age_s=settings.foreign_claim_max_age_s)
        return
    if not runs_wanted and not cache:
        typer.echo("error: say what to delete: --keep N, --before WHEN, --status S (runs; combined, a run must "
                   "match all), and/or --cache or --cache-before WHEN (the stage cache); --vacuum alone only "
                   "shrinks the files", err=True)
        raise typer.Exit(2)
    selection = None
    if runs_wanted:
        if not path.exists():
            typer.echo(no_database(path), err=True)
        else:
            try:
                selection = select_runs(path, keep=keep, before=cutoff, status=status,
                                        claim_max_age_s=settings.foreign_claim_max_age_s)
            except ValueError as exc:
                typer.echo(f"error: {exc}", err=True)
                raise typer.Exit(2) from exc
            spared = f" ({selection.running} more in flight, spared)" if selection.running else ""
            typer.echo(f"{len(selection.run_ids)} of {selection.total} runs in {path} match{spared}")
            if bad := selection.unreadable:
                typer.echo(f"warning: {len(bad)} run(s) could not be read and are spared: {', '.join(bad[:5])}"
                           f"{' ...' if len(bad) > 5 else ''} (`raa trace RUN_ID` says why; --keep alone deletes "
                           "them)", err=True)
            for run_id in selection.run_ids if dry_run else []:
                typer.echo(f"  {run_id}")
    cache_path = settings.cache_path if cache else None
    cache_matches = 0
    if cache and cache_path is None:
        typer.echo("the stage cache is off (RAA_CACHE_PATH); nothing to delete there", err=True)
    elif cache_path is not None and not Path(cache_path).exists():
        typer.echo(f"no stage cache at {cache_path} (none yet)", err=True)
    elif cache_path is not None:
        cache_matches, cache_total = stage_cache_entries(cache_path, before=cache_cutoff)
        typer.echo(f"{cache_matches} of {cache_total} stage cache entries in {cache_path} match")
    if dry_run:
        typer.echo("dry run: nothing deleted")
        return
    runs_go = selection is not None and bool(selection.run_ids)
    if (runs_go or cache_matches) and not yes and not typer.confirm("Delete them?", default=False):
        typer.echo("nothing deleted")
        raise typer.Exit(1)
    # --vacuum also when nothing matches now: the space an earlier prune without it freed is otherwise kept for good
    refused = None
    if selection is not None:
        if runs_go:
            deleted = delete_runs(path, selection.run_ids, settings.foreign_claim_max_age_s)
            typer.echo(f"deleted {deleted} runs; {count_runs(path)} remain")
        if vacuum_files and (refused := vacuum_traces(path, settings.foreign_claim_max_age_s)) is not None:
            typer.echo(f"error: {refused}", err=True)
    if cache_matches and cache_path is not None:  # matches were counted in the cache at cache_path
        deleted, total = stage_cache_entries(cache_path, before=cache_cutoff, delete=True)
        typer.echo(f"deleted {deleted} stage cache entries; {total - deleted} remain")
    if vacuum_files and cache_path is not None and Path(cache_path).exists():
        vacuum_and_say(cache_path, "stage cache", "RAA_CACHE_PATH, or off")
    if refused is not None:  # the deletions are done; the vacuum asked for is not
        raise typer.Exit(2)
