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
* The handlers are installed before the opening held-out evaluation (a fresh run's baseline, or the one a
  resumed run owes): a signal during it stops the run once it has ended, before the first iteration; a fresh
  run has no checkpoint then, and `TrainingStopped` says to start it again (without ``--resume``).
* Ranks agree with one ``all_reduce`` (max) per iteration, so a signal that reached only some ranks (or
  reached them in different iterations) still stops all of them after the same iteration.
* Later SIGTERM / SIGUSR1 are ignored: a rank often gets the stop more than once (from the scheduler,
  from its launcher forwarding it, and from the death signal below when the launcher exits), and a
  second one used to end the process at once, mid-save. SIGINT (Ctrl-C) and SIGKILL still end a rank
  at once, without a checkpoint.
* Which process to signal. Any one rank is enough (the all_reduce above). ``torchrun`` forwards SIGTERM (and SIGINT, SIGHUP, SIGQUIT; SIGUSR1 too
  with ``TORCHELASTIC_SIGNALS_TO_HANDLE=SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1``) to its ranks and kills them
  30 s later; DeepSpeed's per-node ``python -m deepspeed.launcher.launch`` forwards SIGTERM and SIGINT (as
  SIGTERM), also with 30 s. With longer iterations signal the ranks themselves.
* A launcher that dies instead of forwarding: SIGUSR1 to ``torchrun`` ends it (exit 138), SIGTERM or SIGUSR1
  to the ``deepspeed`` command ends it at once (143 / 138; on one node it only waits for its
  ``deepspeed.launcher.launch`` child), and the ranks trained on as orphans to ``max_iterations``, saving
  nothing at the signal. `follow_launcher` (called by training/train.py on every rank a launcher started;
  Linux, a no-op elsewhere): ``prctl(PR_SET_PDEATHSIG, SIGTERM)`` makes the kernel send the rank SIGTERM when
  its parent exits, and when the parent is DeepSpeed's per-node launcher a thread checks every second
  that the launcher's own parent, the ``deepspeed`` command, is still there, and sends the rank SIGTERM
  when it is not. Either way the rank stops with a checkpoint as above (SIGTERM; exit 143, with nobody
  left to report it). A launcher that spawns its ranks from a thread that ends before them would set
  the death signal off early (the kernel counts the thread as the parent); torchrun and DeepSpeed spawn
  from their main thread.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

import torch
import torch.distributed as dist

from tools.procstat import PPID, read_stat_field
from training.rank_failures import NO_CHECKPOINT, RankFailure, failed_on, last_checkpoint

SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
"""The signals that ask for a checkpoint and a stop."""


def skipped_at_end(evaluation: int | None, export_to: Path | None) -> list[str]:
    """What a stop after the run's last iteration left undone: ``evaluation``, the iteration whose held-out
    evaluation it skipped (None: none was due, or it ran); ``export_to``, the final export (``export: final``)."""
    return ([f"the held-out evaluation of iteration {evaluation}"] if evaluation is not None else []) + \
        ([f"the final export to {export_to}"] if export_to is not None else [])


def finish_with_resume(skipped: list[str]) -> str:
    """The todo after a stop at the run's last iteration (a signal: `TrainingStopped`; a W&B failure:
    `training.trainer.last_wandb_todo`): a --resume launch trains no further and runs what the stop skipped
    (`skipped_at_end`, joined with "and"; nothing named when ``skipped`` is empty)."""
    return "finish the run with --resume, which trains no further" + \
        (f" and runs what the stop skipped ({' and '.join(skipped)})" if skipped else "")


class TrainingStopped(RuntimeError):
    """The run stopped on a signal; continue it with ``--resume`` (from the checkpoint the message names)."""

    def __init__(self, iteration: int, signum: int, checkpoint: str | None, *, saved: bool = True,
                 last: bool = False, evaluation: int | None = None, export_to: Path | None = None) -> None:
        """``saved`` False: this launch (a resume) saved no checkpoint before the stop, and ``checkpoint`` is the
        one it resumed from, which a restart continues from again (it used to say "saved"), or, after the run's
        last iteration with nothing skipped, the run's end; ``last``: ``iteration`` was the run's last
        (``max_iterations``); ``evaluation`` and ``export_to``: what that stop skipped (`skipped_at_end`: with
        ``export: none`` and no held-out evaluation due, nothing, and the run is complete); ``checkpoint`` None: a fresh run stopped after its baseline evaluation (iteration 0), before
        anything was trained or saved."""
        name = signal.Signals(signum).name
        self.signum = signum
        if checkpoint is None:
            super().__init__(f"stopped by {name} before the first iteration; nothing was trained and no checkpoint "
                             f"saved: {NO_CHECKPOINT}")
            return
        skipped = skipped_at_end(evaluation, export_to)
        if saved:
            head = f"stopped by {name} after iteration {iteration}; checkpoint {checkpoint} saved."
        elif last and not skipped:  # nothing for a restart to continue: "--resume continues from" contradicted
            head = (f"stopped by {name} at iteration {iteration}; this launch saved no checkpoint, and needs none: "
                    f"{checkpoint}, the checkpoint it resumed from, is the run's end.")  # the todo's "complete"
        else:
            head = (f"stopped by {name} at iteration {iteration}; this launch saved no checkpoint: --resume continues "
                    f"from {checkpoint}, the checkpoint this launch resumed from.")
        if not last:
            todo = " Continue the run with --resume" if saved else ""
        elif not skipped:  # export: none, no evaluation due: the checkpoint was the run's end
            todo = " That was the run's last iteration and the stop skipped nothing: the run is complete and nothing " \
                   "is left to resume"
        else:  # the run trained to its end: only what follows its last save is left, which a --resume launch
            # does without training further
            todo = f" That was the run's last iteration: {finish_with_resume(skipped)}"
            if export_to is not None:
                todo += f", or export alone with `python -m training.export --run {export_to.parent}`"
        super().__init__(head + todo)


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


PR_SET_PDEATHSIG = 1
"""prctl option: the signal the kernel sends this process when its parent exits (linux/prctl.h)."""
DEEPSPEED_LAUNCH = b"deepspeed.launcher.launch"
"""The module DeepSpeed's ``deepspeed`` command runs on each node to start that node's ranks."""


def follow_launcher(parent: int, *, interval: float = 1.0) -> bool:
    """Stop this rank (SIGTERM, so `StopRequest` saves a checkpoint) when the launcher that started it exits
    (module docstring). ``parent``: this process's parent pid read as early as possible; a parent that has
    already changed (the launcher died before the death signal was set) sends the SIGTERM at once. False
    where there is no ``prctl`` (not Linux): nothing is watched."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)
        return True
    try:
        launched_by_deepspeed = DEEPSPEED_LAUNCH in Path(f"/proc/{parent}/cmdline").read_bytes().split(b"\0")
    except OSError:
        launched_by_deepspeed = False
    runner = parent_pid(parent) if launched_by_deepspeed else None
    if runner is not None:
        threading.Thread(target=_watch_runner, args=(parent, runner, interval), name="launcher-watch",
                         daemon=True).start()
    return True


def parent_pid(pid: int) -> int | None:
    """The parent pid of process ``pid`` (``/proc/PID/stat``), None when it is gone or its line is unreadable."""
    return read_stat_field(pid, PPID)


def _watch_runner(launcher: int, runner: int, interval: float) -> None:
    """SIGTERM to this process once ``launcher`` (DeepSpeed's per-node launcher) is no longer the child of
    ``runner`` (the ``deepspeed`` command): the runner died and the launcher was re-parented."""
    while parent_pid(launcher) == runner:
        time.sleep(interval)
    os.kill(os.getpid(), signal.SIGTERM)


class TrainingDiverged(RuntimeError):
    """An update loss, or a rollout's latents, were NaN or inf (``nonfinite_loss: stop``); the diverged weights
    were not saved. Diverged rollouts are never scored (training/decode.py), so a policy whose weights blew up
    shows no non-finite loss: its rollouts are what says so.

    ``unlogged``: rank 0's failure to write the iteration's logs (training/trainer.py: agreed only before a
    checkpoint, which this stop does not save), named as `training.rank_failures.RankFailed` names it; the message
    left it out, so the iteration missing from the logs was explained nowhere but in rank 0's traceback."""

    def __init__(self, iteration: int, count: int, ckpt_dir: Path, rollouts: int = 0,
                 unlogged: RankFailure | None = None) -> None:
        last, goes_on = last_checkpoint(ckpt_dir)
        what = " and ".join([f"{count} update loss(es)"] * bool(count)
                            + [f"the latents of {rollouts} rollout(s)"] * bool(rollouts))
        logs = "" if unlogged is None else (f"; {failed_on(unlogged)}, so the iteration's logs are incomplete "
                                            f"(rank {unlogged.rank}'s stderr has the traceback)")
        super().__init__(
            f"iteration {iteration}: {what} were NaN or inf, so the policy has diverged; stopped "
            f"without saving it{logs}. Last checkpoint: {last}. With a lower learning_rate, {goes_on}, or set "
            "nonfinite_loss: skip to go on regardless")
        self.iteration = iteration


class RewardsStalled(RuntimeError):
    """``max_skipped_iterations`` iterations in a row had no update; a checkpoint was saved."""

    def __init__(self, iteration: int, count: int, checkpoint: str, reason: str, reasons_path: Path) -> None:
        super().__init__(
            f"iteration {iteration}: {count} iterations in a row without an update (no valid sample on any rank), "
            f"e.g. {reason[:300]} (all reasons: {reasons_path}). Saved {checkpoint}; fix the reward (its endpoint "
            "or tool service), then continue with --resume")
        self.iteration = iteration
