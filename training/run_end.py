"""How a training run ends (training/trainer.py): what the loop opened, closed on every way out, and after the
last iteration the agreement that every rank's logs were written, the clean shutdown and the final export.

* `Opened`: the logs (metrics, TensorBoard, W&B), the reward runner (its calls still running are cancelled), the
  rollout-video writer (waited for), the progress bar and the signal handlers, each registered as the trainer
  opens it, then the DeepSpeed engine (its gradient hooks kept the process group alive after a stop:
  training/process_groups.py), closed before any stop (finished, diverged, stalled, stopped by a signal, a
  failure on a rank: training/rank_failures.py); each of them also after one raised (training/closing.py: it
  stopped at the first, leaving the later ones open). As a context manager around the whole run it also closes them
  on every other way out: the logs open before the model loads (a W&B run that cannot start fails in seconds), and a
  model that could not load, a latent-shape ConfigError, ``deepspeed.initialize`` or a checkpoint that could not
  load left TensorBoard's writer and the W&B run open (a later run in the same process was handed the old W&B run);
  so did an exception raised in the loop outside the agreed failures, and a Ctrl-C.
* `finish`: after the last iteration. What the run opened but the logs is closed, and a failure there or rank 0's
  logs that could not be written are agreed by every rank in one collective, which waits for every rank as a
  barrier did; only then are the logs closed, so the W&B run ends with the exit code of the agreed outcome (closed
  before the agreement, it had finished with 0 when the failure the run stopped on was another rank's); a log
  that cannot close (W&B's finish) is agreed in one more collective; then the process group is destroyed,
  after the engine (closed by `Opened`), in DeepSpeed's and PyTorch's documented order (engine hooks and
  buffers, then the groups; DeepSpeed's destroy_process_group also drops the groups it caches, which torch's
  left to interpreter teardown); then rank 0 alone exports the last checkpoint (``export: final``), which every rank
  wrote before the agreement, so a long export times out no rank. With an export, rank 0's logs close after it, with
  its exit code (an ExportError's 1: the W&B run had finished "Finished" before an export that then failed); a
  log that cannot close then stops rank 0 alone, the other ranks finished (no collective is left to agree in).
  A log that cannot close stops the run with the training finished (and exported): its message says so, where it
  said to continue with --resume, with nothing left to train. The signal handlers (``on_signal: checkpoint``) stay
  until the export has ended, where the default action had killed rank 0 mid-export with its W&B run left open:
  one that came after the loop's last agreement stops before the export begins, as
  `training.preemption.TrainingStopped` (exit 128 + the signal, the W&B run's code too; ``--resume`` only
  exports); one during the export only sets the flag, and the export runs to its end (a note says the signal
  came). Raising at the signal inside the export was tried and dropped: an exception at any bytecode of the export
  could not tell an export cut short from one already moved into place (its replaced one still being deleted).
"""

from __future__ import annotations

import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any

from training.closing import close_each
from training.config import TrainConfig
from training.engine import iteration_tag
from training.export import ExportError, export_policy
from training.metrics_log import MetricsLog
from training.preemption import StopRequest, TrainingStopped
from training.rank_failures import RankFailure, agree, attempt, closed_before_stop, stop_on
from training.reward_runner import RewardRunner


@dataclass
class Opened:
    """What the run opened so far, each set by training/trainer.py as it opens it (module docstring)."""

    log: MetricsLog | None = None
    rewards: RewardRunner | None = None
    video_writer: ThreadPoolExecutor | None = None
    bar: Any = None
    stops: StopRequest | None = None
    engine: Any = None
    """The DeepSpeed engine, destroyed last: its gradient hooks, held by torch's autograd where no garbage collection
    reaches them, kept the optimizer, the parameters and their gloo group alive after a stop, into interpreter
    teardown, where gloo's threads could abort the process (training/process_groups.py)."""

    def close(self, exit_code: int = 0) -> None:
        """Each one opened and not closed yet, also after one raised, the first error raised
        (`training.closing.close_each`); a second call closes nothing again. ``exit_code``: the run's, which
        the W&B run ends with (nonzero: failed; `training.metrics_log.MetricsLog.close`)."""
        closes = [*([self.rewards.close] if self.rewards is not None else []),
                  *([partial(self.video_writer.shutdown, wait=True)] if self.video_writer is not None else []),
                  *([self.bar.close] if self.bar is not None else []),
                  *([partial(self.log.close, exit_code)] if self.log is not None else []),
                  *([self.stops.uninstall] if self.stops is not None else []),
                  *([self.engine.destroy] if self.engine is not None else [])]
        self.log = self.rewards = self.video_writer = self.bar = self.stops = self.engine = None
        close_each(closes)

    def close_but_logs_and_stops(self) -> None:
        """`close` all but the logs, which stay open for a later `close` to end the W&B run with the exit code the
        ranks agree on (`finish`), and the signal handlers, which stay until rank 0's export has ended: put back
        before it, a scheduler's SIGTERM during the export took the default action and killed rank 0, its W&B run
        left open (shown crashed)."""
        log, stops, self.log, self.stops = self.log, self.stops, None, None
        try:
            self.close()
        finally:
            self.log, self.stops = log, stops

    def __enter__(self) -> Opened:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """After the run: what is still open (nothing, when it finished or stopped as agreed) closed; after an
        exception, one that closing raises is printed and the run's own is raised, and the W&B run ends failed with
        the run's exit code (`closed_before_stop`): finished as a success, a run that crashed or was interrupted
        read "Finished" in W&B, where wandb's own exit hook had marked it failed."""
        if exc is None:
            self.close()
        else:
            closed_before_stop(self.close, exc)  # an error in either: printed


def finish(cfg: TrainConfig, *, rank: int, start: int, done: int, unlogged: RankFailure | None, opened: Opened,
           ckpt_dir: Path) -> None:
    """After the last iteration ``done`` of a launch that began at ``start`` (collective: every rank): close what the run ``opened``, agree on rank 0's
    logs (`training.rank_failures.RankFailed` on every rank when they failed), shut down, export (module
    docstring). ``unlogged``: this rank's failure to write an iteration's logs, not yet agreed."""
    import deepspeed

    # the logs last, after the agreement: a failure on any rank (rank 1's reward runner, rank 0's unwritten logs)
    # ends rank 0's W&B run failed with the stop's exit code, where it had finished as a success before it
    unclosed = attempt(rank, "closing what the run opened", opened.close_but_logs_and_stops)[1]
    stop_on([agree(unlogged or unclosed)], done, ckpt_dir, opened.close)  # the agreement waits for every rank
    # rank 0's logs close after its export, outside any agreement (the W&B run ends with the export's exit code)
    exports = cfg.export == "final" and rank == 0
    out_dir = Path(cfg.output_dir)
    unclosed = None if exports else attempt(rank, "closing the run's logs", opened.close, 0)[1]  # W&B's finish
    # the training had ended: "continue with --resume" sent the user to resume a finished run
    left = (" (the final export did not run)", f"; export the policy with `python -m training.export --run {out_dir}`") \
        if cfg.export == "final" else ("", "")
    stop_on([agree(unclosed)], done, ckpt_dir, todo=_ended(*left))
    deepspeed.comm.destroy_process_group()  # after the engine, destroyed by close (`Opened`)
    if not exports:
        return
    if opened.stops is not None and opened.stops.signum:  # came after the loop's last agreement: no export begins
        raise closed_before_stop(opened.close, TrainingStopped(
            done, opened.stops.signum, str(ckpt_dir / iteration_tag(done)), saved=done > start, last=True,
            export_to=out_dir / "final"))  # (a launch that trained nothing saved nothing: it resumed from `done`)
    try:  # a stop signal now only sets the flag (the handlers stay): the export ends as it would without it
        exported = export_policy(cfg, out_dir / "final", checkpoint_dir=ckpt_dir)
    except Exception as exc:
        raise closed_before_stop(opened.close, ExportError(
            f"training finished and its checkpoints are in {ckpt_dir}, but exporting the policy failed "
            f"({type(exc).__name__}: {exc}); retry with `python -m training.export --run {out_dir}`")) from exc
    print(f"policy exported to {exported}", flush=True)
    if opened.stops is not None and opened.stops.signum:
        print(f"note: {signal.Signals(opened.stops.signum).name} came during the final export, which finished: "
              "nothing is left to resume", file=sys.stderr, flush=True)
    # rank 0 alone, the process group gone: its own stop, agreed with no rank (the others have finished)
    stop_on([attempt(rank, "closing the run's logs", opened.close, 0)[1]], done, ckpt_dir,
            todo=_ended(f" and the policy was exported to {exported}"))


def _ended(done: str, then: str = "") -> str:
    """`training.rank_failures.RankFailed`'s next step for a stop after the last iteration, when only the logs'
    closing (or the export) was left: ``done`` after "training had finished", ``then`` what is left to run."""
    return (f"training had finished{done}: nothing is left to resume (metrics.jsonl has every iteration)"
            f"{then}")
