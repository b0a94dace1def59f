"""The run's logs (rank 0): the rows training/metrics.py summarizes to OUTPUT_DIR/metrics.jsonl, TensorBoard and
W&B, the held-out evaluations, every rollout's reward, the ineligible rewards and the failed prompts (`MetricsLog`),
and their trimming when a run resumes from a checkpoint (`trim_log`, `MetricsLog.trim_after`)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tools.jsonl import keep_rows, mend_tail, read_text, text_lines
from training.closing import close_each
from training.finite import finite_number
from training.wandb_log import WandbRun

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter

    from training.prompt_failures import PromptFailure


def row_through(row: Any, last_iteration: int) -> bool:
    """Whether a run resumed after ``last_iteration`` keeps this log row: a JSON object whose integer
    ``iteration`` is at most ``last_iteration`` (rows a crashed attempt wrote after its checkpoint go); pure."""
    iteration = row.get("iteration") if isinstance(row, dict) else None
    return isinstance(iteration, int) and not isinstance(iteration, bool) and iteration <= last_iteration


def trim_log(path: Path, last_iteration: int) -> int:
    """Rewrite ``path`` to the rows `row_through` ``last_iteration`` keeps (torn lines go too), atomically
    (`tools.jsonl.keep_rows`: a crash leaves the old file or the new one); the number of lines dropped (0: the
    file is left alone)."""
    return keep_rows(path, lambda row: row_through(row, last_iteration))


def section_scalars(section: str, row: dict[str, Any]) -> dict[str, float | int]:
    """A row's finite numbers as TensorBoard / W&B scalars: ``section/name`` (an ``eval_`` prefix dropped), the
    ``iteration`` (their step) left out."""
    return {f"{section}/{key.removeprefix('eval_')}": value for key, value in row.items()
            if key != "iteration" and finite_number(value, bools=True)}


def rows_of(path: Path, iteration: int) -> list[dict[str, Any]]:
    """The rows of ``iteration`` in a JSONL log, in file order ([] without the file); called after `trim_log`,
    so torn lines are gone, and a line that is not a JSON object is skipped as there."""
    if not path.is_file():
        return []
    rows = []
    for line in text_lines(read_text(path)):  # split as tools.jsonl does, a byte-order mark skipped
        try:
            row = json.loads(line)
        except ValueError:
            continue
        found = row.get("iteration") if isinstance(row, dict) else None
        if isinstance(found, int) and not isinstance(found, bool) and found == iteration:
            rows.append(row)
    return rows


METRICS_LOG = "metrics.jsonl"
INELIGIBLE_LOG = "ineligible.jsonl"
EVAL_LOG = "eval.jsonl"
REWARDS_LOG = "rewards.jsonl"
EVAL_REWARDS_LOG = "eval_rewards.jsonl"
FAILED_PROMPTS_LOG = "failed_prompts.jsonl"
LOG_FILES = (METRICS_LOG, INELIGIBLE_LOG, EVAL_LOG, REWARDS_LOG, EVAL_REWARDS_LOG, FAILED_PROMPTS_LOG)
"""The JSONL logs `MetricsLog` writes in OUTPUT_DIR, in the order of `MetricsLog.paths` (training/run_dir.py refuses
a launch where one of them is no regular file; training/run_files.py reads them by these names)."""


class MetricsLog:
    """Appends rows to OUTPUT_DIR/metrics.jsonl and mirrors them to TensorBoard and, with ``wandb_project``,
    to Weights & Biases (training/wandb_log.py; rank 0 only); the
    ineligible rewards go to OUTPUT_DIR/ineligible.jsonl, one line each: iteration, prompt, reason,
    ineligible_kind (none / nan / inf / error); the prompts
    whose image could not be read to OUTPUT_DIR/failed_prompts.jsonl (training/prompt_failures.py).

    Held-out evaluations (training/evaluate.py) go to OUTPUT_DIR/eval.jsonl and TensorBoard ``eval/*``,
    their samples to OUTPUT_DIR/eval_rewards.jsonl (and their saved videos to W&B); every rollout's reward
    (and the run id of its trace, for the agent rewards) to OUTPUT_DIR/rewards.jsonl.
    ``append=False`` (a fresh run) removes existing files first; a resumed run appends, after `trim_after`
    dropped what a crashed attempt wrote past the checkpoint it resumes from."""

    def __init__(self, output_dir: Path, *, enabled: bool, tensorboard: bool, append: bool = True,
                 wandb_project: str | None = None, config: dict[str, Any] | None = None,
                 resume_step: int | None = None) -> None:
        """``resume_step``: the iteration of the checkpoint a resumed launch loads (`trim_after` is then called
        with it); the W&B run is rewound to it (training/wandb_log.py)."""
        self.enabled = enabled
        self.resume_step = resume_step
        self.output_dir = output_dir
        (self.path, self.ineligible_path, self.eval_path, self.rewards_path, self.eval_rewards_path,
         self.failed_prompts_path) = (output_dir / name for name in LOG_FILES)
        self.writer: SummaryWriter | None = None
        self.wandb: WandbRun | None = None
        if enabled:
            output_dir.mkdir(parents=True, exist_ok=True)
            if not append:  # a fresh (not resumed) run starts new files
                for path in self.paths:
                    path.unlink(missing_ok=True)
            try:
                if tensorboard:
                    self._open_writer()
                if wandb_project is not None:
                    self.wandb = WandbRun(output_dir, wandb_project, config or {}, resume=append,
                                          resume_step=resume_step)
            except BaseException as exc:  # a W&B run that cannot start: the caller has no log to close
                try:
                    self.close()  # TensorBoard's writer, opened first
                except Exception as also:
                    exc.add_note(f"closing also failed: {type(also).__name__}: {also}")
                raise

    def _open_writer(self, purge_step: int | None = None) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(self.output_dir / "tensorboard"), purge_step=purge_step)

    @property
    def paths(self) -> tuple[Path, ...]:
        """Every JSONL log of the run (`LOG_FILES`, in its order)."""
        return tuple(self.output_dir / name for name in LOG_FILES)

    def trim_after(self, iteration: int) -> dict[str, int]:
        """On a resume from the checkpoint of ``iteration``, before anything is appended: drop every log's rows
        of later iterations (and torn lines), which the crashed attempt wrote after that checkpoint and the
        resumed run writes again (rank 0 only; `trim_log`). Rows of ``iteration`` itself stay: its metrics,
        rollouts and held-out evaluation were written before its checkpoint. A kept last line without its newline
        is closed then (`tools.jsonl.mend_tail`). The lines dropped, by file.

        TensorBoard events cannot be rewritten in place: the writer is reopened with ``purge_step`` past
        ``iteration``, so TensorBoard drops the crashed attempt's points from there on (it showed both
        attempts' points of those steps, e.g. steps 1, 2, 3, 4, 3, 4).

        A W&B run rewound to just before ``iteration`` (training/wandb_log.py) gets the kept rows of
        ``iteration`` again (training and held-out rows, saved videos), so that its history matches the logs."""
        if not self.enabled:
            return {}
        if self.writer is not None:
            self.writer.close()
            self._open_writer(purge_step=iteration + 1)
        dropped = {path.name: trim_log(path, iteration) for path in self.paths}
        for path in self.paths:  # a kept last row without its newline: the next row was glued onto it
            mend_tail(path)
        if self.wandb is not None and self.wandb.rewound:
            if iteration != self.resume_step:  # the run was rewound to another checkpoint's iteration
                raise ValueError(f"trim_after({iteration}) after the W&B run was rewound to iteration "
                                 f"{self.resume_step}: pass the loaded checkpoint's iteration as resume_step")
            self._replay_wandb(self.wandb, iteration)
        return {name: n for name, n in dropped.items() if n}

    def _replay_wandb(self, run: WandbRun, iteration: int) -> None:
        """Log the rows of ``iteration`` that the logs keep to W&B again, in file order (`trim_after`)."""
        for path, section in ((self.path, "train"), (self.eval_path, "eval")):
            for row in rows_of(path, iteration):
                run.log(section_scalars(section, row), iteration)
        self._wandb_videos(iteration, rows_of(self.eval_rewards_path, iteration))

    def write_iteration(self, row: dict[str, float | int], parts: list[dict[str, Any]]) -> None:
        """A training iteration's logs from its row and all ranks' parts (`gather`): metrics.jsonl (and
        TensorBoard), ineligible.jsonl, rewards.jsonl; not W&B (`wandb_iteration`): what ``--resume`` keeps is
        these files, and a W&B error raised in the middle of them left the iteration's ineligible and rewards
        lines unwritten (training/checkpointing.py)."""
        iteration = int(row["iteration"])
        self._append(self.path, "train", row)
        self.write_ineligible(iteration, [item for p in parts for item in p["ineligible_items"]])
        self.write_rewards(iteration, [item for p in parts for item in p["reward_items"]])

    def wandb_iteration(self, row: dict[str, float | int]) -> None:
        """A training iteration's row to W&B (nothing without it), after `write_iteration`."""
        if self.enabled and self.wandb is not None:
            self.wandb.log(section_scalars("train", row), int(row["iteration"]))

    def write_evaluation(self, row: dict[str, float | int], items: list[dict[str, Any]]) -> None:
        """A held-out evaluation's logs (training/evaluate.py): eval.jsonl (and TensorBoard), eval_rewards.jsonl;
        not W&B (`wandb_evaluation`, after it), as `write_iteration`: a W&B error between the files left the
        evaluation's samples unwritten, and a resume that found its eval.jsonl row did not evaluate again
        (training/best.py ``pending_eval``), so eval_rewards.jsonl lacked them for good."""
        self._append(self.eval_path, "eval", row)
        self._lines(self.eval_rewards_path, items)

    def wandb_evaluation(self, row: dict[str, float | int], items: list[dict[str, Any]]) -> None:
        """A held-out evaluation's row and saved videos to W&B (nothing without it), after `write_evaluation`."""
        if self.enabled and self.wandb is not None:
            self.wandb.log(section_scalars("eval", row), int(row["iteration"]))
            self._wandb_videos(int(row["iteration"]), items)

    def _append(self, path: Path, section: str, row: dict[str, float | int]) -> None:
        """One row to its JSONL log (non-finite values as null) and TensorBoard ``section/*``; W&B gets it
        separately (`wandb_iteration`, `wandb_evaluation`)."""
        if not self.enabled:
            return
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
        with path.open("a") as fh:
            fh.write(json.dumps(clean) + "\n")
        step = int(row["iteration"])
        scalars = section_scalars(section, row)
        if self.writer is not None:
            for tag, value in scalars.items():
                self.writer.add_scalar(tag, value, step)
            self.writer.flush()

    def write_ineligible(self, iteration: int, items: list[dict[str, Any]]) -> None:
        """One line per ineligible reward of `iteration`, from all ranks: its prompt, reason and ineligible_kind
        (`training.rollout_log.ineligible_items`), after the iteration."""
        self._lines(self.ineligible_path, [{"iteration": iteration, **item} for item in items])

    def write_failed_prompts(self, iteration: int, failures: Sequence[PromptFailure]) -> None:
        """One line per prompt of `iteration` (all ranks) whose image could not be read: its text, place, image and
        reason (`training.prompt_failures.PromptFailure.record`)."""
        self._lines(self.failed_prompts_path, [f.record(iteration) for f in failures])

    def write_rewards(self, iteration: int, items: list[dict[str, Any]]) -> None:
        """One line per rollout of `iteration` (all ranks): rank, group, sample, prompt, reward (None when
        ineligible) and the run id of the reward's trace when it has one (`raa trace RUN_ID`)."""
        self._lines(self.rewards_path, [{"iteration": iteration, **item} for item in items])

    def _wandb_videos(self, iteration: int, rows: list[dict[str, Any]]) -> None:
        """Upload the saved videos of held-out sample ``rows`` that rank 0 can read, as ``eval/video/pPPP_sSS``
        (nothing without W&B)."""
        if self.wandb is None:
            return
        videos = {f"eval/video/{Path(r['video']).stem}": (self.output_dir / r["video"], r["text"])
                  for r in rows if r.get("video") and (self.output_dir / r["video"]).is_file()}
        if videos:
            self.wandb.log_videos(videos, iteration)

    def _lines(self, path: Path, rows: list[dict[str, Any]]) -> None:
        """Append one JSON line per row (rank 0 only; nothing to write, no file touched)."""
        if not self.enabled or not rows:
            return
        with path.open("a") as fh:
            fh.writelines(json.dumps(row) + "\n" for row in rows)

    def close(self, exit_code: int = 0) -> None:
        """TensorBoard's writer and the W&B run, both also when the other raised (training/closing.py); a nonzero
        ``exit_code`` (the run's, stopped by an exception) marks the W&B run failed (`WandbRun.finish`)."""
        run, self.wandb = self.wandb, None
        close_each([*([self.writer.close] if self.writer is not None else []),
                    *([partial(run.finish, exit_code)] if run is not None else [])])
