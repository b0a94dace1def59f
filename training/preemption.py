"""Stop a training run cleanly when the cluster asks (``on_signal: checkpoint``, DESIGN.md §6).

Schedulers send SIGTERM (or a configured signal, SLURM ``--signal=USR1@120``) some time before they kill a
preempted or timed-out job. `StopRequest` turns SIGTERM and SIGUSR1 into a flag; the trainer asks
`StopRequest.agreed` once per iteration, after its metrics, and when any rank has seen a signal every rank
saves the checkpoint of that iteration and the run ends with `TrainingStopped` (exit 128 + the signal's
number). ``--resume`` continues from there exactly as from any checkpoint. The run's other early ends are
here too: `TrainingDiverged` (non-finite losses) and `RewardsStalled` (``max_skipped_iterations``).

Decisions where the issue was silent:

* The iteration in progress is finished, not abandoned: its rollouts and update are the expensive part,
  and a checkpoint must sit between iterations (the prompt position and the RNG are saved per iteration).
  A grace period shorter than one iteration loses that iteration anyway; ask for the signal early enough.
* Ranks agree with one ``all_reduce`` (max) per iteration, so a signal that reached only some ranks (or
  reached them in different iterations) still stops all of them after the same iteration.
* Later SIGTERM / SIGUSR1 are ignored: a rank often gets the stop more than once (from the scheduler and
  from its launcher forwarding it), and a second one used to end the process at once, mid-save.
  SIGINT (Ctrl-C) and SIGKILL still end a rank at once, without a checkpoint.
* Launchers forward the signal to every rank (``torchrun`` and ``deepspeed`` do), and then wait only so
  long before killing the ranks (``torchrun``: 30 s by default): with long iterations, send the signal to
  the rank processes themselves or give the launcher more time.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType

import torch
import torch.distributed as dist

from training import engine as ds_engine

SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
"""The signals that ask for a checkpoint and a stop."""


class TrainingStopped(RuntimeError):
    """The run stopped on a signal after saving a checkpoint; continue it with ``--resume``."""

    def __init__(self, iteration: int, signum: int, checkpoint: str) -> None:
        name = signal.Signals(signum).name
        super().__init__(f"stopped by {name} after iteration {iteration}; checkpoint {checkpoint} saved. Continue "
                         "the run with --resume")
        self.signum = signum


class StopRequest:
    """SIGTERM / SIGUSR1 -> a flag the ranks agree on; `install` only in the main thread."""

    def __init__(self) -> None:
        self.signum = 0
        """The signal received on this rank (0: none)."""
        self._previous: dict[int, object] = {}

    def install(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if not self.signum:  # a later one changes nothing (module docstring)
            self.signum = signum

    def agreed(self, device: torch.device) -> int:
        """The signal number when any rank has received one (0: none). Collective: every rank, every call."""
        flag = torch.tensor([float(self.signum)], device=device)
        if dist.is_initialized():
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return int(flag.item())

    def uninstall(self) -> None:
        """Put back the handlers `install` replaced."""
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)  # type: ignore[arg-type]
        self._previous.clear()


class TrainingDiverged(RuntimeError):
    """An update loss was NaN or inf (``nonfinite_loss: stop``); the diverged weights were not saved."""

    def __init__(self, iteration: int, count: int, ckpt_dir: Path) -> None:
        tag = ds_engine.latest_tag(ckpt_dir)
        last = "none yet" if tag is None else str(ckpt_dir / tag)
        super().__init__(
            f"iteration {iteration}: {count} update loss(es) were NaN or inf, so the policy has diverged; stopped "
            f"without saving it. Last checkpoint: {last}. Resume from it (--resume) with a lower learning_rate, "
            "or set nonfinite_loss: skip to go on regardless")
        self.iteration = iteration


class RewardsStalled(RuntimeError):
    """``max_skipped_iterations`` iterations in a row had no update; a checkpoint was saved."""

    def __init__(self, iteration: int, count: int, checkpoint: str, reason: str, reasons_path: Path) -> None:
        super().__init__(
            f"iteration {iteration}: {count} iterations in a row without an update (no valid sample on any rank), "
            f"e.g. {reason[:300]} (all reasons: {reasons_path}). Saved {checkpoint}; fix the reward (its endpoint "
            "or tool service), then continue with --resume")
        self.iteration = iteration
