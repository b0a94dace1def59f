"""`raa demo`: the project's main job on sample clips it generates.

1. Render the labelled `small` clip suite (MuJoCo, one short clip per pattern) to `OUT/clips`, listed
   in `OUT/manifest.jsonl` (the layout of `raa make-clips --out OUT`).
2. Run the model-free evidence on every clip: the quality pre-check and LK motion tracks
   (a track-overlay strip per clip is written next to the clips).
3. When the backbone endpoint is configured (`RAA_BASE_URL`, `RAA_MODEL`, `RAA_API_KEY`), score every
   clip with the reward agent (preset `full` by default), print a table with the reward and the
   `raa trace RUN_ID` command of each run, and write one HTML report per run.
   Without an endpoint it says exactly which settings to set and how to start a vLLM server, and
   scores nothing: a reward is never pretended.

Decisions where the issue was silent: the model-free part uses the LK tracker (no weights). A setting
that does not parse (`RAA_*`, backbone or tools) stops the demo before anything is rendered, with one
error line and exit status 2, as every other command does; clips that cannot be rendered (no GL
context: `MUJOCO_GL`) stop it with one error line and exit status 1, as `raa make-clips`.
The clips were rendered into `OUT/clips/clips/` (the suite's own `clips/` inside the demo's) before; a
folder of that layout is not read and the clips are rendered again in the new one.
Clips already in `OUT/clips` are a cache of one suite: they are re-used only when its manifest lists
every clip asked for (`--limit`, else the whole `small` suite) as that suite renders it (name, clip
seed, frame count and size: `--seed` changes them) and the clip files are there. A manifest that lacks
some (a render whose clips failed writes the ones that did) is rendered again, which keeps the clips
of the same suite it lists; one written for another seed or size is replaced, with a line saying so
(before, any manifest with enough rows was re-used, whatever seed had rendered it). Scoring
uses the `full` preset unless `--preset` says otherwise; its WMReward tool loads V-JEPA 2 from
`RAA_VJEPA_MODEL` (hub id or local path). Where those weights cannot be had, pass
`--preset no_wmreward`: a load failure makes each run ineligible with the reason, never a fake score.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from graph.config import PRESETS
from graph.reward_format import reward_text

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable

    from evals.clipsuite import ClipSpec
    from graph.settings import BackboneSettings
    from tools.quality import QualityThresholds
    from tools.settings import ToolSettings


def _evidence_table(rows: list[dict], out: Path, console: Console, thresholds: QualityThresholds) -> None:
    """Quality check and LK motion summary per clip (no model involved); `thresholds`: the same
    RAA_QUALITY_* thresholds the agent uses."""
    import cv2

    from tools.motion import LKTracker, draw_tracks, summarize_tracks
    from tools.quality import check_quality
    from tools.video import VideoError, read_frames, uniform_indices
    from tools.video import probe as probe_video
    from tools.video_errors import fault_label

    table = Table(title="Model-free evidence (quality pre-check, LK motion tracks)")
    for col in ("clip", "label", "pattern", "frames", "quality", "moving points"):
        table.add_column(col)
    notes: list[str] = []
    tracker = LKTracker()
    overlays = out / "overlays"
    overlays.mkdir(parents=True, exist_ok=True)
    for row in rows:
        name = Path(row["path"]).stem
        try:
            meta = probe_video(row["path"])
            frames = read_frames(row["path"], uniform_indices(meta.frames, min(meta.frames, 32)))
        except VideoError as exc:
            table.add_row(name, row["label"], row["pattern"], "-", fault_label(exc), "-")
            notes.append(f"{name}: {exc}")
            continue
        quality = check_quality(frames, thresholds=thresholds)
        if not quality.usable:
            table.add_row(name, row["label"], row["pattern"], str(meta.frames), "zero (unusable)", "-")
            notes.append(f"{name}: {quality.reason}")
            continue
        tracks = tracker.track(frames, grid_size=12)
        summary = summarize_tracks(tracks, frames.shape[1:3])
        drawn = draw_tracks(frames, tracks)
        pick = uniform_indices(len(drawn), 4)
        strip = np.concatenate([drawn[i] for i in pick], axis=1)
        cv2.imwrite(str(overlays / f"{name}.png"), cv2.cvtColor(strip, cv2.COLOR_RGB2BGR))
        table.add_row(name, row["label"], row["pattern"], str(meta.frames), "usable",
                      f"{summary.moving_points}/{summary.points}")
    console.print(table)
    for note in notes:
        console.print(f"  {escape(note)}")
    console.print(f"Track overlays: {escape(str(overlays))}/")


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _score(rows: list[dict], out: Path, preset: str, concurrency: int, console: Console,
           settings: BackboneSettings, tool_settings: ToolSettings) -> None:
    """Score every clip with the reward agent and write a report per run, with the settings `demo_command` read."""
    import graph.commands as commands
    from evals.report import write_run_report
    from graph import ascore_videos
    from graph.backbone import Backbone
    from graph.cache import StageCache

    settings.ensure_parent_dirs()
    commands.preflight_or_exit(settings)  # a wrong endpoint: one line now, not 18 ineligible rows after retries
    # the preset's tool models, loaded now (exit 2 naming the tool and the preset without it), as score-batch does
    tools = commands.loaded_tools(settings, preset, tool_settings)
    backbone = Backbone.from_settings(settings, model=commands.make_chat_model(settings),
                                      cache=StageCache(settings.cache_path))
    items = [(r["path"], r["instruction"]) for r in rows]
    console.print(f"Scoring {len(items)} clips with preset [bold]{preset}[/] against "
                  + escape(f"{settings.base_url} ({settings.model})") + " ...")
    results = asyncio.run(ascore_videos(items, settings.agent_config(preset), max_concurrency=concurrency,
                                        backbone=backbone, settings=settings, tools=tools))  # its trace settings too
    # the run id is what `raa trace` takes: never cut short (narrow consoles get a compact table in which
    # only the clip name folds: here it is the row's label, so it is kept whole rather than cut as in `raa runs`)
    table, full = commands.run_table(f"Reward agent ({preset})", console.width)
    table.add_column("clip", overflow="fold", min_width=8)
    for col in ("label", "reward", "status", "T", "P", "V"):
        table.add_column(col, no_wrap=True)
    table.add_column("run id", no_wrap=True, min_width=max(len(r.run_id) for r in results))
    reports = out / "reports"
    for row, res in zip(rows, results, strict=True):
        table.add_row(_clip_name(row, full), row["label"], "⊥" if res.reward is None else reward_text(res.reward),
                      res.status, _fmt(res.T), _fmt(res.P), _fmt(res.V), res.run_id)
    console.print(table)
    console.print("step through a run: raa trace RUN_ID")
    for res in results:
        try:
            path = write_run_report(res.run_id, reports / f"{res.run_id}.html", traces_path=settings.traces_path,
                                    claim_max_age_s=settings.foreign_claim_max_age_s)
            console.print(f"report: {escape(str(path))}")
        except Exception as exc:  # a missing report must not hide the scores above
            console.print(f"[yellow]no report for {res.run_id}: {escape(str(exc))}[/]")
    for res in results:
        if res.status == "ineligible":
            console.print(f"[yellow]{res.run_id} ineligible:[/] {escape('; '.join(res.reasons)[:300])}")


def _clip_name(row: dict, full: bool) -> str:
    """A score table's clip: the file name on wide consoles, else its number and hacking pattern (the
    label has its own column; at 80 columns a whole name folded into four lines a clip)."""
    stem = Path(row["path"]).stem
    return stem if full else f"{stem.split('_', 1)[0]} {row.get('pattern', '')}".strip()


def _cached_rows(manifest: Path, load: Callable[[Path], list[dict]]) -> tuple[list[dict], str | None]:
    """(the rows of the clip cache's manifest, paths absolute; why it cannot be read, or None). A missing
    manifest has no rows; an unreadable one is replaced like one of another suite (`make_clips` would
    refuse to add clips to it)."""
    from evals.clipsuite import ManifestError

    if not manifest.is_file():
        return [], None
    try:
        return load(manifest), None
    except ManifestError as exc:
        return [], f"unreadable manifest: {exc}"


def _cache_misses(rows: list[dict], suite: list[ClipSpec], wanted: list[ClipSpec],
                  side: int) -> tuple[list[str], str | None]:
    """(names of the `wanted` clips that the cached `rows` lack, the first row of another suite or None).

    A row is the suite's when `suite` (the whole suite of the asked seed) renders a clip as the row says:
    name, clip seed, frames, `side` x `side` pixels, generator version; it serves that clip when its file exists too. One row
    that is not the suite's (another `--seed`, size or clip generator, or a row by hand) makes the manifest foreign:
    `make_clips` refuses to add clips to it, so it is replaced when clips are missing."""
    from evals.clipsuite import row_describes

    specs = {spec.name: spec for spec in suite}
    served, foreign = set(), None
    for row in rows:
        name = row.get("name")
        spec = specs.get(name) if isinstance(name, str) else None
        if spec is not None and row_describes(row, spec, side):
            if Path(row["path"]).is_file():
                served.add(spec.name)
        elif foreign is None:
            foreign = (f"{row.get('name')}: clip seed {row.get('seed')}, {row.get('width')}x{row.get('height')}, "
                       f"suite version {row.get('suite_version')}")
    return [spec.name for spec in wanted if spec.name not in served], foreign


def demo_command(
    out: Path = typer.Option(Path("demo_out"), "--out", help="output folder"),
    preset: str = typer.Option("full", "--preset", help="agent preset used when an endpoint is configured"),
    seed: int = typer.Option(0, "--seed", min=0, help="clip-suite seed (>= 0)"),
    concurrency: int = typer.Option(4, "--concurrency", min=1, help="clips scored at once"),
    limit: int | None = typer.Option(None, "--limit", min=1, help="only the first N clips of the suite"),
) -> None:
    """Generate sample clips, run the evidence tools, and score them when an endpoint is configured."""
    from evals.clipsuite import (
        PRESET_SIZE,
        ClipSuiteError,
        ClipSuiteRequestError,
        load_manifest,
        make_clips,
        suite_specs,
    )
    from evals.scenes import RenderError
    from graph.settings import BackboneSettings, SettingsError
    from tools.settings import ToolSettings

    if preset not in PRESETS:
        raise typer.BadParameter(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    os.environ.setdefault("MUJOCO_GL", "egl")
    console = Console()
    try:
        settings = BackboneSettings.from_env()
        tool_settings = ToolSettings.from_env()
    except (SettingsError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    from evals.eval_cli_common import out_dir

    out_dir(out)  # a file at (or above) --out: exit 2 before anything is printed, as `raa make-clips`
    clips_dir = out / "clips"  # the suite's layout: OUT/manifest.jsonl lists OUT/clips/*.mp4
    manifest = out / "manifest.jsonl"
    suite = suite_specs("small", seed)
    wanted = suite[:limit]
    cached, broken = _cached_rows(manifest, load_manifest)
    missing, foreign = _cache_misses(cached, suite, wanted, PRESET_SIZE["small"])
    foreign = broken or foreign
    if not missing:
        console.print(f"Re-using the clips in {escape(str(clips_dir))} (delete it to render them again).")
    else:
        if foreign:  # make_clips refuses to mix two suites in one manifest: this cache is replaced
            console.print(f"The clips in {escape(str(clips_dir))} were rendered with other settings ({escape(foreign)}); "
                          f"rendering seed {seed}'s clips there instead.")
            manifest.unlink()
        console.print(f"Rendering the labelled sample clips into {escape(str(clips_dir))} ...")
        try:
            make_clips(out, seed=seed, preset="small", progress=True, limit=limit)
        except ClipSuiteRequestError as exc:  # refused before rendering (its manifest): as `raa make-clips`
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        except (ClipSuiteError, RenderError) as exc:  # no GL context, or clips that failed: as `raa make-clips`
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None
    by_name = {row.get("name"): row for row in load_manifest(manifest)}
    rows = [by_name[spec.name] for spec in wanted if spec.name in by_name]
    console.print(f"{len(rows)} clips, manifest {escape(str(manifest))}")
    _evidence_table(rows, out, console, tool_settings.quality)
    if not settings.configured:
        # soft_wrap: the commands must stay copyable on one line in any terminal width
        console.print("\n[bold yellow]No reward was computed:[/] " + escape(settings.describe_missing()), soft_wrap=True)
        console.print("Then run this command (`make demo` or `raa demo`) again to score these clips with the reward "
                      "agent, or score one:\n"
                      + escape(f"  raa score {rows[0]['path']} -i \"{rows[0]['instruction']}\" --stream"), soft_wrap=True)
        return
    _score(rows, out, preset, concurrency, console, settings, tool_settings)
