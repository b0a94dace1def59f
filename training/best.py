"""The checkpoint with the best held-out reward (``OUTPUT_DIR/eval.jsonl``): ``keep_checkpoints`` keeps it,
``python -m training.export --run DIR --tag best`` exports it.

A policy trained against a learned reward can peak and then drift (reward hacking), so the last
checkpoint is not always the one to keep. Decisions where the issues were silent:

- "Best" is the highest ``eval_reward_mean`` among iterations that have both a held-out row and a
  checkpoint (``iter_NNNNNN``); a tie goes to the later iteration; a row whose mean is null (every
  held-out reward ineligible) never counts. When a resume repeats an iteration, its last row counts.
- A held-out evaluation at an iteration without a checkpoint cannot be exported, so it is not a
  candidate. The trainer therefore also checkpoints an evaluation between ``checkpoint_every``
  iterations when it raises the best mean of the trained iterations so far (`is_new_best`; the baseline
  at iteration 0 is the base model and has no checkpoint), so the best is always exportable. With
  ``eval_every`` a multiple of ``checkpoint_every`` every evaluation is a checkpoint anyway and nothing
  extra is written; otherwise ``--check`` notes that more checkpoints than the schedule's may be written.
- Pruning keeps the best checkpoint besides the newest ``keep_checkpoints``. Rank 0 decides which
  one it is (it writes eval.jsonl) and tells the other ranks, so every node keeps the same one.
- ``eval_patience: P`` stops a run once P held-out evaluations in a row have not beaten the best mean
  so far, strictly (`evals_since_best`; the baseline at iteration 0 is the first best). An evaluation whose
  rewards were all ineligible (mean null) counts neither way: an unreachable reward is
  ``max_skipped_iterations``'s business, not a plateau. A resume counts on from eval.jsonl.
"""

from __future__ import annotations

import math
from pathlib import Path

from tools.jsonl import json_objects
from training.collectives import as_rank0_sees
from training.config import TrainConfig
from training.engine import iteration_tag


def best_needs_aligned_evals(cfg: TrainConfig) -> str | None:
    """A note for ``--check`` when some held-out evaluations fall between checkpoints (each one that
    raises the best mean is checkpointed too: more checkpoints than ``checkpoint_every`` says); None
    otherwise."""
    if not cfg.eval_every or cfg.eval_every % cfg.checkpoint_every == 0:
        return None
    return (f"note: eval_every {cfg.eval_every} is not a multiple of checkpoint_every {cfg.checkpoint_every}: "
            "a held-out evaluation between checkpoints that raises the best mean is checkpointed too "
            "(more checkpoints on disk; keep_checkpoints prunes them)")


def is_new_best(means: dict[int, float], iteration: int) -> bool:
    """Whether the held-out mean at ``iteration`` (> 0) is above every earlier one of a trained iteration
    (``iteration -> eval_reward_mean``, finite means): the trainer checkpoints such an evaluation so that the
    best stays exportable. A tie is not (the earlier equal already is a checkpoint); the first trained
    evaluation is; False without a mean at ``iteration``."""
    if iteration <= 0 or iteration not in means:
        return False
    return all(means[iteration] > m for it, m in means.items() if 0 < it < iteration)


def on_eval_schedule(cfg: TrainConfig, iteration: int) -> bool:
    """Whether the trainer evaluates after ``iteration`` (every ``eval_every`` iterations, and the last)."""
    return bool(cfg.eval_every) and (iteration % cfg.eval_every == 0 or iteration == cfg.max_iterations)


def evaluated_iterations(eval_path: Path) -> set[int]:
    """Iterations with a held-out row in ``eval_path`` (whatever their mean); empty without the file."""
    out = set()
    for row in json_objects(eval_path)[0]:
        try:
            out.add(int(row["iteration"]))
        except (ValueError, KeyError, TypeError):
            continue
    return out


def pending_eval(cfg: TrainConfig, start: int, eval_path: Path) -> bool:
    """Whether a run resumed at ``start`` owes the held-out evaluation of that iteration: on the schedule, and
    no row for it (a stop signal skips the evaluation to save within the grace period). Rank 0's answer on
    every rank (it writes eval.jsonl; a collective: call on all ranks)."""
    if start <= 0 or not on_eval_schedule(cfg, start):
        return False
    return bool(as_rank0_sees(lambda: start not in evaluated_iterations(eval_path)))


def eval_means(eval_path: Path) -> dict[int, float]:
    """``iteration -> eval_reward_mean`` of the held-out rows in ``eval_path`` (the last row of an
    iteration; rows without a finite mean, and unreadable lines, left out); {} without the file."""
    means: dict[int, float] = {}
    for row in json_objects(eval_path)[0]:
        try:
            iteration, mean = int(row["iteration"]), row.get("eval_reward_mean")
        except (ValueError, KeyError, TypeError):
            continue
        if isinstance(mean, int | float) and math.isfinite(mean):
            means[iteration] = float(mean)
        else:
            means.pop(iteration, None)
    return means


def best_checkpoint(ckpt_dir: Path, eval_path: Path) -> tuple[str, int, float] | None:
    """(tag, iteration, eval_reward_mean) of the best held-out checkpoint in ``ckpt_dir`` (module
    docstring), or None when no held-out row has a checkpoint."""
    candidates = [(mean, it) for it, mean in eval_means(eval_path).items() if (ckpt_dir / iteration_tag(it)).is_dir()]
    if not candidates:
        return None
    mean, it = max(candidates)
    return iteration_tag(it), it, mean


def agreed_best_tag(ckpt_dir: Path, eval_path: Path) -> str | None:
    """`best_checkpoint`'s tag as rank 0 sees it, on every rank (a collective when torch.distributed is
    initialised: call it on all ranks)."""
    def tag() -> str | None:
        found = best_checkpoint(ckpt_dir, eval_path)
        return None if found is None else found[0]

    return as_rank0_sees(tag)


def evals_since_best(means: dict[int, float]) -> int:
    """How many held-out evaluations (``iteration -> eval_reward_mean``, finite means only) came after the
    first one to reach the best mean: only a strictly higher mean resets the count (a tie is no progress,
    unlike the checkpoint choice, where the later of equals is kept). 0 without evaluations."""
    if not means:
        return 0
    best = max(means, key=lambda it: (means[it], -it))
    return sum(it > best for it in means)


def agreed_eval_means(eval_path: Path) -> dict[int, float]:
    """`eval_means` as rank 0 reads them, on every rank (a collective when torch.distributed is
    initialised): what a resumed run's ``eval_patience`` counts on from."""
    return as_rank0_sees(lambda: eval_means(eval_path))

