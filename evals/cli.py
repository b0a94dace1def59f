"""CLI command for the clip suite:
``raa make-clips --out DIR [--seed S] [--preset paper|small] [--size PX] [--limit N] [--no-progress]``.

This is the edge: it is the one place that sets ``MUJOCO_GL`` (to ``egl`` unless the caller chose a GL
backend) so that headless machines render without extra set-up. A bad preset or size, an `--out` that
cannot be a folder (a file, a place that cannot be written), or one whose manifest cannot take this suite
(another suite's clips, or unreadable: `ClipSuiteRequestError`), is a usage error (exit code 2); a clip-suite
or renderer failure prints its message and exits with code 1.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import typer


def make_clips_command(
    out: Path = typer.Option(..., "--out", help="Folder for clips/*.mp4 and manifest.jsonl."),
    seed: int = typer.Option(0, "--seed", min=0, help="Suite seed (>= 0): the same seed renders the same frames."),
    preset: str = typer.Option("small", "--preset",
                               help="paper: the 180-clip suite (100 ordinary + 80 hacking/control); "
                                    "small: one short clip per pattern."),
    size: int | None = typer.Option(None, "--size",
                                    help="Square frame size in pixels: even, 16 to 1024 (default: the preset's)."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Render only the first N clips of the preset."),
    progress: bool = typer.Option(True, "--progress/--no-progress",
                                  help="Show a progress bar (--no-progress: none, e.g. for a log file)."),
) -> None:
    """Render the labelled MuJoCo clip suite and write its manifest."""
    from evals.clipsuite import PRESETS

    if preset not in PRESETS:
        raise typer.BadParameter(f"unknown preset {preset!r}; choose one of: {', '.join(PRESETS)}",
                                 param_hint="--preset")
    from evals.clipsuite import suite_size_problem

    if size is not None and (problem := suite_size_problem(size)):
        raise typer.BadParameter(problem, param_hint="--size")
    from evals.eval_cli_common import fail, out_dir

    out_dir(out)  # a file at (or above) --out is a usage error, exit 2, as for `raa eval reward --out`
    os.environ.setdefault("MUJOCO_GL", "egl")
    from evals.clipsuite import ClipSuiteError, ClipSuiteRequestError, load_manifest, make_clips
    from evals.scenes import RenderError

    try:
        manifest = make_clips(out, seed=seed, preset=preset,  # type: ignore[arg-type]  # checked above
                              progress=progress, size=size, limit=limit)
    except ClipSuiteRequestError as exc:  # nothing rendered: the request, or its --out folder's manifest
        raise fail(str(exc)) from None
    except (ClipSuiteError, RenderError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    from evals.eval_views import plural

    rows = load_manifest(manifest)
    counts = Counter(r["label"] for r in rows)
    summary = ", ".join(f"{counts[k]} {k}" for k in ("ordinary", "failure", "unobservable", "progress") if counts[k])
    typer.echo(f"wrote {plural(len(rows), 'clip')} ({summary}); manifest: {manifest}")
