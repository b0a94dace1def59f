"""A checkpoint of the trainer (step 5 of training/trainer.py), on every rank, with what follows DeepSpeed's save:
``layout.json`` and the prompt stamp (training/resume.py, training/prompt_stamp.py), ``latest`` moved
(training/engine.py ``mark_latest``), each on a node's local rank 0, then ``keep_checkpoints``' pruning.

Those files were written by local rank 0 alone, and an exception there (a full disk, a read-only folder) ended
that rank while the others went on to their next collective and waited there until the launcher killed them.
Each step now runs under `training.rank_failures.attempt` and the ranks agree on a failure
(`training.rank_failures.agree`, one ``all_gather_object`` of a small record for the markers and one for the
pruning: per checkpoint, not per iteration), so every rank stops with the same `RankFailed` naming the rank and
the error. The pruning's own barrier is left out (`training.engine.prune` has none): the agreement on the markers
already waits for every rank.

No checkpoint is saved past an iteration whose logs rank 0 could not write (``unlogged``: metrics.jsonl and the
rest, TensorBoard; failed_prompts.jsonl): that failure, which rank 0 keeps for the next iteration's first gather,
is agreed first (`logs_agreed`, one more ``all_gather_object`` on an iteration that evaluates or checkpoints,
before the evaluation: one spent on an iteration then refused was wasted), and every rank stops on it
(`RankFailed`, naming the checkpoint before) without saving. Saved, the checkpoint was where ``--resume`` went on,
and the iteration's row was missing from metrics.jsonl for good; a stop signal's or a stall's checkpoint also
dropped the failure itself (the run stopped on TrainingStopped or RewardsStalled). A run stopped so loses the
iteration's training, which the resumed run redoes and logs; that is the price of the logs, which no later run
can write.

W&B alone failing (``unsynced``: its ``run.log`` raised, the service process gone) is no such hole: the files
``--resume`` keeps were written, and the resumed run's W&B run, rewound to the checkpoint, is sent the checkpoint's
rows again from them (training/metrics_log.py ``trim_after``). It used to refuse the checkpoint all the same, so a
W&B hiccup cost up to ``checkpoint_every`` iterations of training. Agreed in the same gather, after every iteration
of a run with W&B (one small ``all_gather_object``, next to an iteration's rollouts and update), it now saves the
iteration's checkpoint (the held-out evaluation, whose rows go to W&B too, is left to the resumed run:
training/best.py ``pending_eval``), and the run stops on it after the save (training/trainer.py). W&B failing on
the held-out evaluation's rows, written to eval.jsonl and eval_rewards.jsonl first, is handed back the same way
(training/evaluate.py ``evaluate_everywhere``): the iteration is saved, and the resumed run finds the evaluation.

Not covered: an exception inside DeepSpeed's ``save_checkpoint`` on one rank. It has barriers of its own, and
which of them the failing rank skipped depends on where it raised, so no agreement after it can meet the
other ranks; they wait in DeepSpeed's barrier until the launcher stops them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from training import engine as ds_engine
from training.best import agreed_best_tag
from training.lr_schedule import schedule_state
from training.metrics import gather
from training.prompt_stamp import write_prompt_stamp
from training.rank_failures import RankFailure, agree, attempt, first_failure, stop_on
from training.resume import StateLayout, write_layout


def _markers(ckpt_dir: Path, iteration: int, layout: StateLayout, world: int, stamp: dict[str, Any], local_rank: int,
             schedule: dict[str, Any] | None) -> None:
    if local_rank == 0:  # what a later --resume compares its ZeRO stage, dtype and rate with (training.resume)
        write_layout(ckpt_dir / ds_engine.iteration_tag(iteration), layout, world, schedule)
        write_prompt_stamp(ckpt_dir / ds_engine.iteration_tag(iteration), stamp)
        ds_engine.mark_latest(ckpt_dir, iteration)


def logs_agreed(unlogged: RankFailure | None, unsynced: RankFailure | None, iteration: int, ckpt_dir: Path,
                close: Callable[[int], None]) -> RankFailure | None:
    """Before ``iteration``'s evaluation and checkpoint (collective: one ``all_gather_object``), rank 0's failures
    to write its logs, not agreed yet: ``unlogged`` (the files) on any rank raises `RankFailed` on every rank, after
    ``close()``; ``unsynced`` (W&B alone) is returned to every rank, for the checkpoint to be saved before the run
    stops on it (module docstring). Call before every `checkpoint`."""
    parts = gather({"unlogged": unlogged, "unsynced": unsynced})
    stop_on([part["unlogged"] for part in parts], iteration, ckpt_dir, close)  # saved, a hole a resume never fills
    return first_failure([part["unsynced"] for part in parts])


def checkpoint(engine: Any, ckpt_dir: Path, iteration: int, data_position: int, *, skipped: int, rank: int,
               local_rank: int, world: int, layout: StateLayout, stamp: dict[str, Any], keep: int | None,
               evals: tuple[Path, str | None], close: Callable[[int], None]) -> None:
    """Save ``iteration``'s checkpoint on every rank (collective), `logs_agreed` before it; ``latest`` moves once
    all have written (training/engine.py); with ``keep`` (``keep_checkpoints``) the stale ones go, the best
    held-out one stays (training/best.py), also when this launch does not evaluate but the run's eval.jsonl names
    one (``evals``: its path and the launch's ``eval_key``). A failure of the markers or the pruning on any rank
    raises `RankFailed` on every rank, after ``close()``."""
    ds_engine.save(engine, ckpt_dir, iteration, data_position, local_rank=local_rank, skipped=skipped)
    tag = ds_engine.iteration_tag(iteration)
    _, failure = attempt(rank, f"finishing checkpoint {tag}", _markers, ckpt_dir, iteration, layout, world, stamp,
                         local_rank, schedule_state(engine))
    stop_on([agree(failure)], iteration, ckpt_dir, close)
    if keep is None:
        return
    best = agreed_best_tag(ckpt_dir, *evals)  # after the markers: the new checkpoint may be the best
    _, failure = attempt(rank, f"pruning the checkpoints after {tag}", ds_engine.prune, ckpt_dir, keep,
                         local_rank, best)
    stop_on([agree(failure)], iteration, ckpt_dir, close)
