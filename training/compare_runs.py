"""Several training runs on one page: ``python -m training.report --run A --run B [--run C ...] --out FILE``.

An ablation (DynDiff against uniform SDE noise, one preset against another, two learning rates) is read
side by side: a table of the runs [runs] (reward, progress, best held-out checkpoint, last reward), one
chart per series any run logged with a line per run [curves] (ids ``compare-<series>``), and the
held-out means [held-out-compare]. Each run's own page (``python -m training.report --run DIR``) has
its samples and videos; this page has only the curves.

Decisions where the issue was silent: a run is named by its folder, with as many parent folders as it
takes to tell runs of the same folder name apart (one run given twice is an error); series are charted in
the single-run page's order; a run that lacks a series simply has no line in that chart; the same point
thinning applies (training/report.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from evals.report_html import PALETTE, esc, fmt, multi_line_chart, page, section, table
from tools.jsonl import write_text_atomic
from training.best import best_checkpoint
from training.metrics_log import EVAL_LOG
from training.report import chart_keys, finite_or_none, metric_series, reward_label
from training.run_files import RunFiles, read_run


def run_labels(run_dirs: Sequence[Path]) -> list[str]:
    """A short distinct name per run: its folder name, with as many parent folders as it takes to tell it from
    the runs of the same name (``sweepA/lr1e-4/run`` and ``sweepB/lr1e-4/run``: ``sweepA/lr1e-4/run`` ...);
    ValueError naming a folder given twice (the same run after resolving ``..`` and links)."""
    paths = [Path(d).resolve() for d in run_dirs]
    for k, path in enumerate(paths):
        if path in paths[:k]:
            raise ValueError(f"the run {path} is given twice (--run {run_dirs[paths.index(path)]} and --run {run_dirs[k]})")
    depth = [1] * len(paths)
    labels = [_tail(p, 1) for p in paths]
    while len(set(labels)) < len(labels):  # a longer tail only for the runs whose label repeats
        repeated = {label for label in labels if labels.count(label) > 1}
        depth = [d + 1 if label in repeated else d for d, label in zip(depth, labels, strict=True)]
        labels = [_tail(p, d) for p, d in zip(paths, depth, strict=True)]
    return labels


def _tail(path: Path, depth: int) -> str:
    """The last ``depth`` parts of an absolute ``path`` joined by "/" (the whole path once ``depth`` reaches it).
    Tails of different depths differ in their number of "/", so lengthening some labels never makes them
    equal to a shorter one."""
    parts = path.parts[1:]  # without the root
    return str(path) if depth >= len(parts) else "/".join(parts[-depth:])


def _runs_table(runs: Sequence[RunFiles], labels: Sequence[str]) -> str:
    rows = []
    for k, (files, label) in enumerate(zip(runs, labels, strict=True)):
        cfg, last = files.config, (files.metrics[-1] if files.metrics else {})
        best = best_checkpoint(files.run_dir / "checkpoints", files.run_dir / EVAL_LOG)
        colour = PALETTE[k % len(PALETTE)]
        rows.append([f"<b style=\"color:{colour}\">{esc(label)}</b>", esc(str(files.run_dir.resolve())),
                     esc(reward_label(files)),
                     esc(f"{last.get('iteration', 0)} of {cfg.get('max_iterations', '?')}"),
                     esc(fmt(finite_or_none(last.get("reward_mean")))),
                     esc(f"{best[0]} ({best[2]:.4f})" if best else "none")])
    return section("runs", f"{len(runs)} training runs",
                   table(["run", "output_dir", "reward", "iterations", "last reward_mean", "best held-out"],
                         rows, raw=True))


def render_comparison(run_dirs: Sequence[Path]) -> str:
    """The comparison page of ``run_dirs`` (at least two; FileNotFoundError naming one that is not a run)."""
    if len(run_dirs) < 2:
        raise ValueError(f"a comparison needs at least two runs, got {len(run_dirs)}")
    runs = [read_run(Path(d)) for d in run_dirs]
    labels = run_labels(run_dirs)
    charts = []
    for key in chart_keys([r for files in runs for r in files.metrics]):
        series = [(label, *metric_series(files.metrics, key)) for files, label in zip(runs, labels, strict=True)]
        if any(xs for _, xs, _ in series):
            charts.append(f"<div><b>{esc(key)}</b><br>"
                          + multi_line_chart(series, chart_id=f"compare-{key}", x_label="iteration") + "</div>")
    curves = section("curves", "Training curves (metrics.jsonl)",
                     f"<div class=\"grid\">{''.join(charts)}</div>" if charts else "<p class=\"muted\">no iterations yet</p>")
    held = [(label, *metric_series(files.evals, "eval_reward_mean")) for files, label in zip(runs, labels, strict=True)]
    held_out = section("held-out", "Held-out eval_reward_mean (eval.jsonl)",
                       multi_line_chart(held, chart_id="held-out-compare", x_label="iteration"))
    return page("Training runs: " + ", ".join(labels), _runs_table(runs, labels) + curves + held_out)


def write_comparison(run_dirs: Sequence[Path], out: Path) -> Path:
    """Write the comparison page to ``out``; its path."""
    html = render_comparison(run_dirs)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, html)  # as the single-run page (training/report.py)
    return out
