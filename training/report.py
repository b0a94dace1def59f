"""Self-contained HTML report of a training run: ``python -m training.report --run OUTPUT_DIR``
(with several ``--run`` and ``--out FILE``, their curves on one page: training/compare_runs.py).

One file (``OUTPUT_DIR/report.html`` unless ``--out``) that answers "is this run learning the task?"
without TensorBoard or W&B, e.g. on a cluster's login node. Sections (element ids in brackets):
the run [run-header]; training curves from metrics.jsonl [curves], one chart per logged series
(reward, eligible share, each reward component, KL, clipping, gradient norm, empty optimizer steps, learning
rate); held-out evaluation [held-out]: the eval.jsonl curve [held-out-curve] and a table of every held-out sample
across evaluations [held-out-table] with its reward, its components and, with ``eval_videos: save``, a
strip of its frames; with ``rollout_videos_every``, the latest saved iteration's rollouts [rollouts]
[rollouts-table], one row per prompt group, each clip with its reward and advantage; the most frequent
reasons rewards were ineligible [ineligible].

Decisions where the issue was silent:

- It only reads the run's files (metrics.jsonl, eval.jsonl, eval_rewards.jsonl, ineligible.jsonl,
  config.yaml, checkpoints/, eval_videos/), so it works on a run that is still going: a line being
  written (not valid JSON yet) is skipped and counted in the header. When a resume repeated an
  iteration, its last row counts, as for the best checkpoint (training/best.py); a resume trims the logs
  to its checkpoint (training/metrics_log.py), and for runs that were not trimmed the rollouts keep the last
  line of each (iteration, rank, group, sample) and the ineligible lines of an iteration the last
  ``ineligible_count`` its metrics row reports (the last attempt's; training/run_rows.py, which also names in
  the header the rewards.jsonl rows left out for a rank, group or sample that is no integer). Held-out rows (and
  samples) are those of the run's latest measurement (``eval_key``), the rule the best checkpoint in the
  header follows; rows of an earlier one are counted in the header, not charted.
- A chart shows at most MAX_POINTS (500) evenly spaced iterations of a series, the first and last
  among them, so a 10,000-iteration run's page stays a few MB.
- The held-out table shows at most ``columns`` evaluations: the first, the best (``*``), the last and
  evenly spaced ones between, so a long run's page stays small; every evaluation is in the curve. The
  ``*`` marks the header's best held-out checkpoint (training/best.py: a complete checkpoint's evaluation,
  a tie to the later one), not a higher mean without one (the baseline, a pruned or never-saved iteration),
  which the page's two answers disagreed on; no ``*`` while no evaluation has a checkpoint.
- The page is written through a temporary file renamed over it (also the comparison page): a page
  regenerated while a run goes on never replaces a good one with a cut one (a full disk, a kill).
- The header names the model behind an agent reward (``reward_backbone.json``, training/provenance.py).
- The rollouts shown are those of the latest iteration that wrote videos (its rewards.jsonl rows carry a
  ``video`` field, training/rollout_log.py), every one of them: a rollout without a clip (diverged, or its mp4
  could not be written) shows its reward and "no video" with the reason, and an iteration whose clips were all
  skipped is still that iteration (a table of an older one hid the divergence).
- An eval_rewards.jsonl row whose prompt, sample or iteration is no integer is left out and counted apart from
  the lines that are not JSON, with its own header line.
- A sample the reward agent scored names its trace (``raa report RUN_ID`` shows the whole judgment).
- A frame strip is ``frames`` uniformly spaced frames of the saved sample, side by side, as one JPEG;
  a sample whose video is missing or unreadable shows its reward and says so.
- With one optimizer step per iteration (``inner_epochs * optimizer_steps_per_epoch == 1``, the config
  default), the approx_kl, clip_fraction and mask_flip_fraction charts say they are ~0 by construction (every ratio is
  measured on the old policy; bf16 leaves some noise), so a flat zero line does not read as a broken KL.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from evals.report_html import esc, fmt, line_chart, page, section, table
from tools.jsonl import write_text_atomic
from training.best import best_checkpoint
from training.finite import finite_number
from training.metrics_log import EVAL_LOG
from training.report_exports import final_export_label
from training.report_notes import checkpoint_list, ineligible_note
from training.run_files import RunFiles, read_run

CURVES = ("reward_mean", "eligible_fraction", "approx_kl", "clip_fraction", "mask_flip_fraction", "mu_kl",
          "grad_norm", "empty_steps", "lr", "rollout_diversity", "seconds_rollout", "seconds_reward", "seconds_update")
"""metrics.jsonl series charted in this order, after reward_mean the reward components (reward_*_mean);
the reward's usage (reward_usage_*) last."""
STRIP_HEIGHT = 72
"""Pixel height of a frame strip."""
MAX_POINTS = 500
"""Points per chart: a longer series is shown at evenly spaced iterations (first and last kept)."""


def finite_or_none(value: Any) -> float | None:
    return float(value) if finite_number(value, bools=True) else None


def reward_label(files: RunFiles) -> str:
    """The run's reward as the pages name it: ``agent (preset full) · model NAME`` (the preset when the
    options give one or, for a served reward, the service reported one; the model when reward_backbone.json
    records one, "unreported" when it records a service that did not say)."""
    cfg, backbone = files.config, files.reward_backbone or {}
    options = given if isinstance(given := cfg.get("reward_options"), dict) else {}
    preset = options.get("preset") or backbone.get("preset")
    return (f"{cfg.get('reward', '?')}" + (f" (preset {preset})" if preset else "")
            + (f" · model {backbone.get('model') or 'unreported'}" if backbone else ""))


def model_label(cfg: dict[str, Any]) -> str:
    """The base weights as the header names them: ``model_path`` ("tiny random" / "?" without one) and, when set,
    ``(revision R)``: a hub id alone does not say which weights a run trained from once the branch moves."""
    model = cfg.get("model_path") or ("tiny random" if cfg.get("tiny") else "?")
    return f"{model} (revision {cfg['model_revision']})" if cfg.get("model_revision") else str(model)


def _header(files: RunFiles) -> str:
    cfg, rows = files.config, files.metrics
    checkpoints = checkpoint_list(files.run_dir / "checkpoints")  # a killed save marked (training/report_notes.py)
    best = best_checkpoint(files.run_dir / "checkpoints", files.run_dir / EVAL_LOG)
    model = model_label(cfg)
    facts = [
        ("output_dir", str(files.run_dir.resolve())),
        ("model", f"{cfg.get('backend', '?')} · {model} · {cfg.get('finetune', '?')}"),
        ("reward", reward_label(files)),
        ("iterations", f"{rows[-1]['iteration'] if rows else 0} of {cfg.get('max_iterations', '?')}"),
        ("checkpoints", checkpoints),
        ("best held-out checkpoint", f"{best[0]} (eval_reward_mean {best[2]:.4f})" if best else "none"),
        ("final export", final_export_label(files.run_dir)),  # its iteration (training/report_exports.py)
    ]
    if files.other_evals:
        facts.append(("earlier held-out measurements", f"{files.other_evals} eval.jsonl rows measured another way "
                      "(reward, prompts, samples, seed or sampler changed on a resume): not shown or compared"))
    if files.skipped_lines:
        facts.append(("lines skipped", f"{files.skipped_lines} (not JSON: being written, or torn)"))
    if files.unplaced_evals:
        facts.append(("eval_rewards.jsonl rows left out", f"{files.unplaced_evals} whose prompt, sample or iteration "
                      "is missing or no integer"))
    if files.left_out:  # hand-edited rows: named, not a crash of the page (training/run_rows.py)
        facts.append(("rewards.jsonl rows left out", f"{len(files.left_out)} whose iteration, rank, group or sample "
                      "is no integer: " + "; ".join(files.left_out[:3]) + (" ..." if len(files.left_out) > 3 else "")))
    return section("run-header", f"Training run {files.run_dir.resolve().name}", table(["", "value"], facts))


def metric_series(rows: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    """(iterations, values) of ``key``, at most MAX_POINTS of them (module docstring)."""
    pairs = [(float(r["iteration"]), v) for r in rows if (v := finite_or_none(r.get(key))) is not None]
    if len(pairs) > MAX_POINTS:
        pairs = [pairs[round(k * (len(pairs) - 1) / (MAX_POINTS - 1))] for k in range(MAX_POINTS)]
    return [x for x, _ in pairs], [y for _, y in pairs]


def chart_keys(rows: list[dict[str, Any]]) -> list[str]:
    """The series to chart for metrics rows (of one run or several): CURVES with the reward components
    (``reward_*_mean``) after reward_mean and the reward's usage (``reward_usage_*``) last."""
    present = {k for r in rows for k in r}
    components = sorted(k for k in present if k.startswith("reward_") and k.endswith("_mean") and k != "reward_mean")
    usage = sorted(k for k in present if k.startswith("reward_usage_"))
    return [CURVES[0], *components, *CURVES[1:], *usage]


def steps_per_iteration(config: dict[str, Any]) -> int | None:
    """Optimizer steps an iteration takes (``inner_epochs * optimizer_steps_per_epoch``, each 1 when the config
    leaves it out, as TrainConfig does); None when config.yaml is missing or the values are not integers."""
    if not config:
        return None
    values = [config.get(k, 1) for k in ("inner_epochs", "optimizer_steps_per_epoch")]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return None
    return values[0] * values[1]


def _curves(files: RunFiles) -> str:
    rows = files.metrics
    charts = []
    one_step = steps_per_iteration(files.config) == 1
    on_policy = ("approx_kl", "clip_fraction", "mask_flip_fraction")  # ~0 with one optimizer step (docstring)
    for key in chart_keys(rows):
        xs, ys = metric_series(rows, key)
        if xs:
            note = ("<br><span class=\"muted\">~0 by construction: one optimizer step per iteration, its ratios are "
                    "measured before it (what is left is numerical noise)</span>" if one_step and key in on_policy else "")
            charts.append(f"<div><b>{esc(key)}</b><br>" + line_chart(xs, ys, chart_id=f"curve-{key}", width=400,
                                                                     height=170, x_label="iteration") + note + "</div>")
    inner = f"<div class=\"grid\">{''.join(charts)}</div>" if charts else "<p class=\"muted\">no iterations yet</p>"
    return section("curves", "Training curves (metrics.jsonl)", inner)


def _columns(iterations: list[int], best: int | None, limit: int) -> list[int]:
    """At most ``limit`` evaluations: first, best, last and evenly spaced ones between (module docstring);
    with ``limit`` 2 and a best in the middle, the best and the last (three columns broke the bound)."""
    if len(iterations) <= limit:
        return iterations
    keep: set[int] = set()
    spaced = [iterations[round(k * (len(iterations) - 1) / (limit - 1))] for k in range(limit)]
    for it in [*([best] if best is not None else []), iterations[-1], iterations[0], *spaced]:
        if len(keep) >= limit:
            break
        keep.add(it)
    return sorted(keep)


def frame_strip(video: Path, frames: int) -> str:
    """``frames`` uniformly spaced frames of ``video`` side by side, STRIP_HEIGHT px high, as a JPEG data URL."""
    import cv2

    from tools.video import encode_jpeg_data_url, probe, read_frames, uniform_indices

    picked = read_frames(video, uniform_indices(probe(video).frames, frames))
    h, w = picked.shape[1:3]
    width = max(1, round(w * STRIP_HEIGHT / h))
    strip = np.concatenate([cv2.resize(f, (width, STRIP_HEIGHT), interpolation=cv2.INTER_AREA) for f in picked], axis=1)
    return encode_jpeg_data_url(strip, quality=80)


def _cell(row: dict[str, Any] | None, run_dir: Path, frames: int, note: str = "") -> str:
    """A sample's reward (``note`` after it), components, trace and frame strip."""
    from tools.video import VideoError

    if row is None:
        return "<span class=\"muted\">not evaluated</span>"
    reward = row.get("reward")
    text = f"<b>{esc(fmt(finite_or_none(reward)))}</b>" if reward is not None else \
        f"<span class=\"badge ineligible\">ineligible</span> <span class=\"muted\">{esc(row.get('reason'))}</span>"
    if note:
        text += f" <span class=\"muted\">{esc(note)}</span>"
    comps = row.get("components") or {}
    if comps:
        text += "<br><span class=\"muted\">" + esc(" ".join(f"{k} {fmt(finite_or_none(v), 2)}" for k, v in comps.items())) + "</span>"
    if row.get("run_id"):  # the agent's trace of this judgment: `raa report RUN_ID` on the host that scored it
        text += f"<br><code class=\"run\">raa report {esc(row['run_id'])}</code>"
    if row.get("video"):
        try:
            text += f"<br><img class=\"strip\" alt=\"frames\" src=\"{esc(frame_strip(run_dir / row['video'], frames))}\">"
        except (VideoError, OSError, ValueError) as exc:  # moved, deleted, unreadable: the reward still shows
            text += f"<br><span class=\"muted\">video {esc(row['video'])} unreadable ({esc(type(exc).__name__)})</span>"
    return text


def _held_out(files: RunFiles, columns: int, frames: int) -> str:
    if not files.evals:
        return section("held-out", "Held-out evaluation",
                       "<p class=\"muted\">no held-out evaluation (set eval_every and eval_dataset)</p>")
    xs, ys = metric_series(files.evals, "eval_reward_mean")
    chart = line_chart(xs, ys, chart_id="held-out-curve", x_label="iteration", y_label="eval_reward_mean")
    means = {int(r["iteration"]): finite_or_none(r.get("eval_reward_mean")) for r in files.evals}
    found = best_checkpoint(files.run_dir / "checkpoints", files.run_dir / EVAL_LOG)
    best = found[1] if found else None  # the header's best checkpoint (module docstring)
    shown = _columns(sorted(means), best, columns)
    header = ["prompt / sample"] + [f"iteration {it}{' *' if it == best else ''} (mean {fmt(means[it])})" for it in shown]
    body = []
    for (prompt, sample), by_iteration in sorted(files.items.items()):
        text = next(iter(by_iteration.values())).get("text", "")
        body.append([f"<b>p{prompt} s{sample}</b><br>{esc(text)}"]
                    + [_cell(by_iteration.get(it), files.run_dir, frames) for it in shown])
    note = "" if files.items else "<p class=\"muted\">no eval_rewards.jsonl: per-sample rows are logged by newer runs</p>"
    style = f"<style>img.strip{{height:{STRIP_HEIGHT}px;border-radius:3px;margin-top:4px}}</style>"
    return section("held-out", "Held-out evaluation (eval.jsonl, eval_rewards.jsonl; * best checkpoint)",
                   style + chart + ineligible_note(files.evals) + note + (table(header, body, table_id="held-out-table", raw=True) if body else ""))


def _rollouts(files: RunFiles, frames: int) -> str:
    if not files.rollouts:
        return section("rollouts", "Training rollouts", "<p class=\"muted\">none saved (rollout_videos_every)</p>")
    groups: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for row in files.rollouts:
        groups.setdefault((int(row.get("rank", 0)), int(row.get("group", 0))), []).append(row)
    body = []
    for (rank, group), members in sorted(groups.items()):
        cells = [_cell(row, files.run_dir, frames, f"advantage {fmt(finite_or_none(row.get('advantage')), 2)}")
                 + ("" if row.get("video") else "<br><span class=\"muted\">no video: "
                    + esc(row.get("video_skipped") or "not written (the run's stderr says why)") + "</span>")
                 for row in sorted(members, key=lambda r: r.get("sample", 0))]
        body.append([f"<b>rank {rank} group {group}</b><br>{esc(members[0].get('prompt', ''))}", "<br>".join(cells)])
    iteration = files.rollouts[0]["iteration"]
    return section("rollouts", f"Training rollouts of iteration {iteration} (rewards.jsonl, rollout_videos/)",
                   table(["prompt group", "samples: reward, advantage, frames"], body, table_id="rollouts-table", raw=True))


def _ineligible(files: RunFiles, top: int = 10) -> str:
    counts = Counter(str(r.get("reason") or "ineligible") for r in files.ineligible)
    if not counts:
        return section("ineligible", "Ineligible rewards", "<p class=\"muted\">none</p>")
    rows = [[str(n), reason] for reason, n in counts.most_common(top)]
    return section("ineligible", f"Ineligible rewards ({len(files.ineligible)}; most frequent reasons)",
                   table(["count", "reason"], rows))


def render_training_report(run_dir: Path, *, columns: int = 6, frames: int = 4) -> str:
    """The report page of the run in ``run_dir`` (see the module docstring)."""
    if columns < 2 or frames < 1:
        raise ValueError(f"columns must be >= 2 and frames >= 1, got {columns} and {frames}")
    files = read_run(run_dir)
    body = (_header(files) + _curves(files) + _held_out(files, columns, frames) + _rollouts(files, frames)
            + _ineligible(files))
    return page(f"Training run {files.run_dir.resolve().name}", body)


def write_training_report(run_dir: Path, out: Path | None = None, *, columns: int = 6, frames: int = 4) -> Path:
    """Write the report (default ``run_dir/report.html``); its path."""
    target = Path(out) if out is not None else Path(run_dir) / "report.html"
    html = render_training_report(run_dir, columns=columns, frames=frames)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(target, html)  # a full disk or a kill leaves the previous page, not a cut one
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.report",
                                     description="Write a self-contained HTML report of a training run.")
    parser.add_argument("--run", required=True, type=Path, action="append",
                        help="the run's output_dir; repeat it to compare runs on one page (needs --out)")
    parser.add_argument("--out", type=Path, default=None, help="the HTML file (default: RUN/report.html)")
    parser.add_argument("--columns", type=int, default=6,
                        help="held-out evaluations shown in the table (>= 2; default 6)")
    parser.add_argument("--frames", type=int, default=4, help="frames per held-out sample strip (>= 1; default 4)")
    args = parser.parse_args(argv)
    try:
        if args.out is not None and args.out.is_dir():  # the rename over it failed with "Is a directory"
            raise ValueError(f"--out {args.out} is a folder; give the HTML file to write, e.g. {args.out / 'report.html'}")
        if len(args.run) > 1:  # training/compare_runs.py
            from training.compare_runs import write_comparison

            if args.out is None:
                raise ValueError(f"comparing {len(args.run)} runs needs --out FILE (there is no one run folder for it)")
            path = write_comparison(args.run, args.out)
        else:
            path = write_training_report(args.run[0], args.out, columns=args.columns, frames=args.frames)
    except (OSError, ValueError) as exc:  # OSError: a wrong --run, or an --out that is a folder or under a file
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"report: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
