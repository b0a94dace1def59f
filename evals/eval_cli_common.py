"""Helpers every `raa eval` command module shares (`evals.eval_cli`, `evals.eval_stats_cli`): the console,
the one-line error exit, `--json` and `--out` handling, and the skipped-lines report. Split from evals/eval_cli.py
(its size)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from tools.jsonl import write_text_atomic


def console() -> Console:
    return Console(soft_wrap=True, markup=False, emoji=False)  # presets, paths and reasons are data: no tags, no ":cat:"


def fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def write_json(path: Path | None, data: dict[str, Any], console: Console) -> None:
    """`--json PATH`: write `data` there (folders created) and say so; nothing without a path."""
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(path, json.dumps(data, indent=2))
        except OSError as exc:  # a folder, an unwritable place: one error line, not a traceback
            raise fail(f"cannot write --json {path}: {exc.strerror or exc}") from exc
        console.print(f"wrote {path}")


def out_dir(out: Path) -> None:
    """Create the `--out` folder before any model is called: a path that is a file (or under one), or a place
    that cannot be written, was a traceback, and for `world-model` only after every question was asked."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise fail(f"cannot use --out {out}: {exc.strerror or exc} (it must be a folder)") from exc


def report_skipped(skipped: list) -> None:
    """Each line a reader skipped, on stderr (`evals.eval_views.skipped_lines`)."""
    from evals.eval_views import skipped_lines

    for line in skipped_lines(skipped):
        typer.echo(line, err=True)
