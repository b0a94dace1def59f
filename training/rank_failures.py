"""A failure on one rank that every rank stops on, in the per-rank parts of training/trainer.py that come before
a collective: the held-out evaluation and the logs rank 0 writes after it (eval.jsonl, eval_rewards.jsonl:
training/evaluate.py ``evaluate_everywhere``), a checkpoint's markers and pruning (training/checkpointing.py),
and an iteration's logs on rank 0 (metrics.jsonl, ineligible.jsonl, rewards.jsonl, failed_prompts.jsonl) and
their closing at the end of the run.

These ran on each rank on its own, and an exception on one rank (a reward that answered with the wrong number
of rewards, the agent's trace store, a decode error, an OSError writing eval.jsonl or metrics.jsonl on rank 0,
a full disk under ``layout.json``, a rollout, decode or reward call that raised) ended that rank alone: the
others waited in their next collective until the launcher killed them (gloo: "Connection closed by peer" once
the rank's process was gone), and the user saw a hang and then a collective timeout instead of the error.

Decisions where the issue was silent:

* A failed evaluation stops the run, it is not recorded and skipped: the trainer's docstrings treat what
  evaluation can survive as ineligible samples already (a reward that raises or times out, a diverged sample,
  a held-out image gone: training/evaluate.py), and what is left is a broken reward (RewardLengthError, exit 2
  by training/train.py ``exit_status``), a broken trace store (StoreError, exit 2) or a bug, which a run that
  trains on would repeat at every evaluation and write nothing for ``eval_patience`` and the best checkpoint
  to read.
* Each rank runs its part under `attempt`: an exception is caught, its traceback printed to stderr by the
  rank that raised it (the one place the stack is known), and the failure (rank, ``Type: text``, exit code)
  is what the rank brings to the next agreement, `agree`, an ``all_gather_object`` of those small records
  (for the evaluation: the gather of the ranks' results, which it already ran, carries them; one more for the
  prompts' encodes, before its first forward; one more for the writes after it; one per checkpoint step, and
  one before each checkpoint or held-out evaluation for rank 0's logs, after every iteration with W&B: a W&B
  failure alone saves the iteration's checkpoint, then stops). An iteration's logs add no other collective: rank 0
  keeps its failure and brings it to the iteration's checkpoint, which is not saved past unwritten files
  (training/checkpointing.py), to the next iteration's first gather (the prompts' failures), or to the agreement that replaced the barrier
  after the last iteration. The iteration's prompt encodes (the encoders and the VAE: no part of the module ZeRO partitions) are agreed in
  that first gather too, before any forward. Phases 1-3 of an iteration (rollouts, decodes,
  the reward's answers, advantages: a reward returning the wrong number of rewards on one rank) add none either:
  they run under `Tried`, and the failure rides as a flag in the update's first all_reduce, the count of valid
  samples (`agreed_count`), the first collective after them; the records are gathered only when a flag is set.
  Every rank then raises the same `RankFailed` naming the lowest failing rank, the error and the last
  checkpoint; its exit code is the one ``exit_status`` gives the original exception (1 for one it does not
  know), raised on every rank.
* Under ZeRO-3 the rollouts' forwards gather the parameters the engine partitions from every rank, so a rank
  that failed before its last forward waited in the all_reduce while the others waited in their next gather:
  each in another collective until the collective timeout (gloo: 30 minutes), which then named no error.
  There the failing rank says what failed in one line, closes what the run opened and raises its exception as it is
  (``Tried(exit_alone=...)``; its exit code by ``exit_status``): its process ends, and the other ranks stop at
  once, on gloo's closed connections or by the launcher, which stops every rank when one fails. Only until the
  block's last forward (``Tried.forwards_done``: the rollouts and decodes of every group are done): a failure
  after it (the reward's answers, a wrong number of rewards; the advantages) finds every rank's gathers run,
  so the ranks meet in the all_reduce and it is agreed as without ZeRO-3, every rank raising `RankFailed`. The
  held-out evaluation's forwards run under the same `Tried` (training/evaluate.py ``evaluate_everywhere``): a
  forward that raised there used to be kept and the rank sampled on, its parameter gathers out of step with the
  others' (gloo: "collective mismatch", the processes aborted; or a hang); its decode errors, after the forwards,
  are still agreed in the gather of the ranks' results.
* One rank (a single-GPU launch) stops the same way: its failure in the rollouts or the held-out evaluation is
  kept and raised as `RankFailed` (the iteration, the last checkpoint, --resume), after ``close()``. It used to
  pass through as it was, so the user read "error: <text>" naming none of these and the run's writers (metrics,
  TensorBoard, W&B, the reward runner) were left unclosed. The original type and text are in the message, its
  stack printed once by `Tried` (training/train.py ``main`` prints RankFailed's one line, no second traceback);
  the exit code is the original exception's (``exit_status``), as with several ranks.
* The update (training/update.py ``update_policy``: forwards, backward, optimizer step) runs under ``Tried`` with
  ``exit_alone`` on any ZeRO stage: with several ranks its backward and step are collectives (the gradients'
  reduction; ZeRO-3's parameter gathers), so a rank that failed there (out of memory in a backward) cannot meet
  the others in an agreement and ends alone as above; one rank's failure is kept and raised as `RankFailed`
  (`stop_on`) right after it. It used to run under neither: the bare exception, nothing closed. A failure that
  every rank raises in the same step, all collectives run (fp16's minimum loss scale, whose overflow is
  all-reduced: training/update.py ``LossScaleAtMinimum``, the one failure `raised_on_every_rank` knows), is kept as
  in a collective-free phase, its traceback printed by rank 0 only, and every rank raises `RankFailed`: each
  rank printed "this rank stops alone" and its own traceback of DeepSpeed's bare Exception.
* A ``close()`` that raises before a stop (W&B's finish, say: `closed_before_stop`) is printed to stderr and the
  stop raised as it was; its error used to replace the stop's message (the iteration, the checkpoint, --resume).
  A Ctrl-C there passes with the stop kept on it (its context, or a note), where it used to pass alone.
* The run stops without saving the iteration: as `training.preemption.TrainingDiverged`, the checkpoint the
  message names is where ``--resume`` continues (and evaluates the missed iteration first:
  training/best.py ``pending_eval``).
"""

from __future__ import annotations

import signal
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from training.closing import keep_on_interrupt

T = TypeVar("T")
E = TypeVar("E", bound=BaseException)


@dataclass(frozen=True)
class RankFailure:
    """What one rank raised, as the other ranks are told it."""

    rank: int
    what: str
    """What it was doing (``the held-out evaluation``)."""
    error: str
    """``Type: text`` of the exception."""
    code: int
    """The exit code of the run (training/train.py ``exit_status`` of the exception; 1 for an unknown one)."""


def failure_of(exc: Exception, rank: int, what: str) -> RankFailure:
    """``exc`` raised on ``rank`` doing ``what`` as a `RankFailure` (its text cut at 2000 characters)."""
    return RankFailure(rank, what, f"{type(exc).__name__}: {str(exc)[:2000]}", exit_code_of(exc))


def failed_on(failure: RankFailure) -> str:
    """``WHAT failed on rank R (Type: text)``: how a stop names one rank's failure (`RankFailed`,
    `training.preemption.TrainingDiverged`'s unwritten logs)."""
    return f"{failure.what} failed on rank {failure.rank} ({failure.error})"


NO_CHECKPOINT = ("start the run again without --resume (there is no checkpoint to continue from; where its "
                 "metrics.jsonl has rows, add --overwrite_output_dir, which deletes its logs, or set another "
                 "output_dir)")
"""How a run stopped before its first checkpoint goes on: --resume refuses it (training/resume.py)."""


def last_checkpoint(ckpt_dir: Path) -> tuple[str, str]:
    """``(last, goes_on)`` for a stop's message: the checkpoint ``--resume`` would load ("none yet" without one)
    and how the run goes on, "continue with --resume", or `NO_CHECKPOINT` before its first checkpoint (the
    baseline evaluation of a fresh run, an iteration before ``checkpoint_every``). A checkpoint saved in full
    whose ``latest`` was never written (its prompt stamp or ``latest`` failed: training/checkpointing.py) is no
    such case: --overwrite_output_dir would delete it, and it resumes once ``latest`` names it (training/resume.py
    ``resume_source`` says the same)."""
    from training.engine import latest_tag
    from training.run_dir import finished_checkpoints

    if (tag := latest_tag(ckpt_dir)) is not None:
        return str(ckpt_dir / tag), "continue with --resume"
    if finished := finished_checkpoints(ckpt_dir):
        return (f"{ckpt_dir / finished[-1]} ('latest' not written)",
                f"write {finished[-1]} into {ckpt_dir / 'latest'}, then continue with --resume")
    return "none yet", NO_CHECKPOINT


def exit_code_of(exc: BaseException) -> int:
    """The exit code of a run that stops with ``exc``: training/train.py ``exit_status``'s, 128 + SIGINT for a
    Ctrl-C, 1 for any other."""
    from training.train import exit_status

    if isinstance(exc, KeyboardInterrupt):
        return 128 + signal.SIGINT
    return status[0] if (status := exit_status(exc)) is not None else 1


def attempt(rank: int, what: str, fn: Callable[..., T], *args: Any) -> tuple[T | None, RankFailure | None]:
    """``(fn(*args), None)``, or ``(None, failure)`` when it raised an Exception, whose traceback goes to stderr
    naming ``rank`` and ``what`` was done (KeyboardInterrupt and other BaseExceptions pass through)."""
    try:
        return fn(*args), None
    except Exception as exc:
        return None, _reported(exc, rank, what)


def _reported(exc: Exception, rank: int, what: str) -> RankFailure:
    """`failure_of` ``exc``, after its traceback went to stderr naming ``rank`` and ``what`` was done."""
    print(f"rank {rank}: {what} failed:\n{''.join(traceback.format_exception(exc))}", file=sys.stderr, flush=True)
    return failure_of(exc, rank, what)


class Tried:
    """``with Tried(rank, world, what) as tried:``: an Exception raised in the block is kept as ``tried.failure``
    (its traceback printed as by `attempt`) for `agreed_count` to bring to every rank, with one rank too: its stop
    names the iteration, the last checkpoint and --resume as several ranks' does, after the run's files are
    closed (module docstring). BaseExceptions (KeyboardInterrupt) always pass through.
    ``exit_alone`` (a block whose collectives a failed rank leaves: ZeRO-3's forwards, the update; several ranks): the
    failure cannot be agreed after the block (module docstring), so it passes through after one line naming the
    rank, what it was doing and the error, and after ``exit_alone()`` closed what the run opened: the rank's
    process ends, and the others stop at once. Its traceback is printed where it ends up (an unknown exception),
    once. One rank has no other rank's gather to miss: its failure is kept, ``exit_alone`` unused."""

    def __init__(self, rank: int, world: int, what: str, *, exit_alone: Callable[[int], None] | None = None) -> None:
        self.rank, self.world, self.what, self.exit_alone = rank, world, what, exit_alone
        self.failure: RankFailure | None = None

    def __enter__(self) -> Tried:
        return self

    def forwards_done(self, what: str) -> None:
        """The block's last forward has run (on every rank as many as here): a failure from now on is agreed as
        doing ``what`` under ZeRO-3 too (no ``exit_alone``; module docstring)."""
        self.what, self.exit_alone = what, None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        if not isinstance(exc, Exception):
            return False
        everywhere = raised_on_every_rank(exc)  # fp16's minimum loss scale: the ranks are in step, all raise it
        if self.exit_alone is not None and self.world > 1 and not everywhere:  # the others are in a collective
            # one line: the exception passes through, with its traceback (training/train.py main: an unknown one
            # propagates, a known one is its "error:" line), so a traceback printed here came twice
            error = failure_of(exc, self.rank, self.what).error
            print(f"rank {self.rank}: {self.what} failed ({error}); this rank stops alone (the other ranks, in a "
                  "collective it never joins, stop on its closed connections)", file=sys.stderr, flush=True)
            closed_before_stop(self.exit_alone, exc)
            return False
        # raised on every rank: rank 0's traceback is enough (RankFailed names it; main prints rank 0's stop)
        self.failure = failure_of(exc, self.rank, self.what) if everywhere and self.rank > 0 else \
            _reported(exc, self.rank, self.what)
        return True


def raised_on_every_rank(exc: Exception) -> bool:
    """Whether ``exc`` is known to be raised by every rank at once inside a block: fp16's minimum loss scale
    (training/update.py ``LossScaleAtMinimum``, decided by an all-reduced overflow). Not every failure
    training/train.py ``exit_status`` says every rank raises: a ConfigError there comes from checks every rank
    runs alike, but inside a block it may be one rank's own data, and kept, that rank would go on to the next
    collective while the others wait in the block's."""
    from training.update import LossScaleAtMinimum

    return isinstance(exc, LossScaleAtMinimum)


def agreed_count(count: float, failure: RankFailure | None, device: Any, iteration: int, ckpt_dir: Path,
                 close: Callable[[int], None] | None = None) -> float:
    """The sum of ``count`` over the ranks (the valid samples the update all-reduces first: training/update.py
    ``valid_total``), with whether any rank brings a ``failure`` in the same all_reduce; when one does, every rank
    agrees on it (`agree`: one all_gather, only then) and raises `RankFailed` (`stop_on`). Collective: call on
    every rank."""
    import torch
    import torch.distributed as dist

    both = torch.tensor([count, float(failure is not None)], dtype=torch.float64, device=device)
    dist.all_reduce(both)
    if both[1].item() > 0:
        stop_on([agree(failure)], iteration, ckpt_dir, close)
    return float(both[0].item())


def first_failure(failures: Sequence[RankFailure | None]) -> RankFailure | None:
    """The failure of the lowest failing rank among the ranks' answers (None: no rank failed); pure."""
    return min((f for f in failures if f is not None), key=lambda f: f.rank, default=None)


def agree(failure: RankFailure | None) -> RankFailure | None:
    """Every rank's `first_failure` of all ranks' ``failure`` (collective when torch.distributed is
    initialised with more than one rank: call on every rank)."""
    from training.metrics import gather

    return first_failure([part["failure"] for part in gather({"failure": failure})])


def stop_on(failures: Sequence[RankFailure | None], iteration: int, ckpt_dir: Path,
            close: Callable[[int], None] | None = None, *, todo: str | None = None) -> None:
    """Raise `RankFailed` for the `first_failure` of the ranks' ``failures`` (after ``close``, which closes
    what the run opened: `closed_before_stop`); nothing when no rank failed. Every rank passes the same
    ``failures``, so all raise. The world it names is torch.distributed's (one process without it); ``todo``:
    `RankFailed`'s."""
    if (failure := first_failure(failures)) is None:
        return
    import torch.distributed as dist

    stop = RankFailed(iteration, failure, ckpt_dir, world=dist.get_world_size() if dist.is_initialized() else 1,
                      todo=todo)
    raise closed_before_stop(close, stop) if close is not None else stop


def closed_before_stop(close: Callable[[int], None], stop: E) -> E:
    """``close(exit code)`` (what the run opened) before ``stop`` is raised, with the stop's exit code
    (`exit_code_of`), which the W&B run ends with (nonzero: failed; with 0 W&B read "Finished" for a run that
    stopped). An Exception it raises (W&B's finish, say) is printed to stderr with its traceback and not raised,
    so the stop's message is what the run ends with (module docstring). BaseExceptions (KeyboardInterrupt)
    pass through, the stop kept on them (`training.closing.keep_on_interrupt`): a Ctrl-C while W&B finished lost
    the stop's message. Returns ``stop``, for the caller to raise."""
    try:
        close(exit_code_of(stop))
    except Exception as exc:
        print(f"closing the run's files before the stop failed (the stop follows):\n"
              f"{''.join(traceback.format_exception(exc))}", file=sys.stderr, flush=True)
    except BaseException as exc:
        keep_on_interrupt(exc, stop, "the run was stopping")
        raise
    return stop


class RankFailed(RuntimeError):
    """A part of an iteration failed on one rank (`RankFailure`); every rank of the ``world`` stopped (module
    docstring). With one rank the message says the run stopped, its traceback printed above (`Tried`, `attempt`):
    "every rank stopped (rank 0's stderr has the traceback)" spoke of ranks a single-GPU run does not have."""

    def __init__(self, iteration: int, failure: RankFailure, ckpt_dir: Path, *, world: int,
                 todo: str | None = None) -> None:
        """``todo``: what the user does next, where it is not "fix the cause, then" `last_checkpoint`'s way on (a
        run that had ended: training/run_end.py ``finish``)."""
        last, goes_on = last_checkpoint(ckpt_dir)
        stopped = ("the run stopped (its traceback is printed above)" if world == 1 else
                   f"every rank stopped (rank {failure.rank}'s stderr has the traceback)")
        super().__init__(
            f"iteration {iteration}: {failed_on(failure)}; {stopped}. "
            f"Last checkpoint: {last}; {todo or f'fix the cause, then {goes_on}'}")
        self.iteration = iteration
        self.failure = failure
