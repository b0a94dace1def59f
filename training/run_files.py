"""The files of one training run as the report reads them (training/report.py, training/compare_runs.py):
``read_run(OUTPUT_DIR)`` -> `RunFiles`. The reading rules (the last row per iteration, the latest held-out
measurement only, the last attempt's ineligible lines and rollouts, torn lines counted) are the report's
decisions, in training/report.py's docstring.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.file_kinds import read_at
from tools.jsonl import json_objects
from training.best import has_iteration, latest_key, rows_of_key
from training.metrics_log import EVAL_LOG, EVAL_REWARDS_LOG, INELIGIBLE_LOG, METRICS_LOG, REWARDS_LOG
from training.provenance import read_reward_backbone
from training.run_rows import last_attempt_ineligible, last_attempt_rollouts, placed_rollouts


@dataclass
class RunFiles:
    """What the report reads from one output folder."""

    run_dir: Path
    """The run's output_dir."""
    metrics: list[dict[str, Any]] = field(default_factory=list)
    """metrics.jsonl rows, the last per iteration, by iteration."""
    evals: list[dict[str, Any]] = field(default_factory=list)
    """eval.jsonl rows of the run's latest measurement (``eval_key``, training/best.py), the last per
    iteration, by iteration."""
    other_evals: int = 0
    """eval.jsonl rows of earlier measurements (another ``eval_key``): not shown, never compared."""
    items: dict[tuple[int, int], dict[int, dict[str, Any]]] = field(default_factory=dict)
    """eval_rewards.jsonl: (prompt, sample) -> iteration -> line (the last one)."""
    ineligible: list[dict[str, Any]] = field(default_factory=list)
    """ineligible.jsonl lines (of each iteration's last attempt: `last_attempt_ineligible`)."""
    rollouts: list[dict[str, Any]] = field(default_factory=list)
    """rewards.jsonl lines of the latest iteration that wrote rollout videos (``video`` there, a name or null),
    of its last attempt (`last_attempt_rollouts`)."""
    config: dict[str, Any] = field(default_factory=dict)
    """config.yaml (the launch's resolved TrainConfig), {} without it."""
    reward_backbone: dict[str, Any] | None = None
    """reward_backbone.json (training/provenance.py): the model behind an agent reward, None without it."""
    skipped_lines: int = 0
    """Lines that were not JSON objects (a line being written, a torn file)."""
    unplaced_evals: int = 0
    """eval_rewards.jsonl rows of the latest measurement whose prompt, sample or iteration is no integer."""
    left_out: list[str] = field(default_factory=list)
    """rewards.jsonl rows whose iteration, rank, group or sample is no integer, named (training/run_rows.py)."""


def _lines(path: Path, files: RunFiles) -> list[dict[str, Any]]:
    rows, skipped = json_objects(path)
    files.skipped_lines += skipped
    return rows


def _last_per_iteration(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_iteration = {r["iteration"]: r for r in rows if has_iteration(r)}
    return [by_iteration[i] for i in sorted(by_iteration)]


def read_run(run_dir: Path) -> RunFiles:
    """The files of the run in ``run_dir``; FileNotFoundError when it has neither metrics.jsonl nor eval.jsonl."""
    import yaml

    run_dir = Path(run_dir)
    if not (run_dir / METRICS_LOG).is_file() and not (run_dir / EVAL_LOG).is_file():
        raise FileNotFoundError(f"{run_dir} has no metrics.jsonl or eval.jsonl: not a training output_dir "
                                "(or the run has not finished its first iteration)")
    files = RunFiles(run_dir)
    files.metrics = _last_per_iteration(_lines(run_dir / METRICS_LOG, files))
    evals = [r for r in _lines(run_dir / EVAL_LOG, files) if has_iteration(r)]
    current = rows_of_key(evals)
    files.evals, files.other_evals = _last_per_iteration(current), len(evals) - len(current)
    for row in _lines(run_dir / EVAL_REWARDS_LOG, files):
        if row.get("eval_key") != latest_key(evals):  # a sample of an earlier measurement
            continue
        try:
            key, iteration = (int(row["prompt"]), int(row["sample"])), int(row["iteration"])
        except (KeyError, TypeError, ValueError):  # JSON, but not placeable: not a torn line
            files.unplaced_evals += 1
            continue
        files.items.setdefault(key, {})[iteration] = row
    files.ineligible = last_attempt_ineligible(_lines(run_dir / INELIGIBLE_LOG, files), files.metrics)
    placed, files.left_out = placed_rollouts(_lines(run_dir / REWARDS_LOG, files))
    saved = [r for r in last_attempt_rollouts(placed) if "video" in r and has_iteration(r)]
    if saved:
        latest = max(r["iteration"] for r in saved)
        files.rollouts = [r for r in saved if r["iteration"] == latest]
    kind, data = read_at(run_dir / "config.yaml")  # one look: one gone after an is_file raised FileNotFoundError
    if kind is None:
        try:
            loaded = yaml.safe_load(data.decode("utf-8"))
        except yaml.YAMLError:  # a torn or hand-edited file: the page shows "?" for the run's settings
            loaded = None
        files.config = loaded if isinstance(loaded, dict) else {}
    files.reward_backbone = read_reward_backbone(run_dir)
    return files
