"""Loaded at startup by every Python process of a launch the test harness runs (tests/conftest.py puts this folder
first on PYTHONPATH; no library code does): torchrun, its ranks, ``python -m ...``.

* SIGUSR2 writes every thread's Python stack to stderr (`run_to_end` sends it to a launch past its deadline, so
  its failure shows where each rank waits). Not SIGUSR1: the trainer stops on it (training/preemption.py).
* DeepSpeed's CPU backend does not build its shared-memory op (``deepspeed_shm_comm``): its
  ``build_shm_op`` answers None, as on a machine where the op cannot be built. The ranks JIT-built it at
  process-group start in the machine-wide torch extensions folder, ~70 s whenever another launch had built it
  with another command, and without limit behind the lock file of a build that was killed. DeepSpeed has no
  setting for it (0.19: ``build_shm_op`` builds whenever the op builder says it is compatible), so the
  module's function is replaced right after the module runs, without importing DeepSpeed here.
* Nor does the launch announce that build (``training.build_locks.launch_build_note`` answers None): it printed
  "will build ... nothing printed meanwhile" into every launch's output, so a hung test launch's output blamed
  a build that never ran.
"""

from __future__ import annotations

import faulthandler
import signal
import sys

from stand_ins import StandIns

faulthandler.register(signal.SIGUSR2, all_threads=True)

SHM_MODULE = "deepspeed.comm.torch"
NOTE_MODULE = "training.build_locks"


def no_shm_op() -> None:
    """What ``deepspeed.comm.torch.build_shm_op`` answers where the op cannot be built."""
    return None


def no_build_note(*_args: object, **_kwargs: object) -> None:
    """What ``training.build_locks.launch_build_note`` answers where no build comes."""
    return None


REPLACED = {SHM_MODULE: ("build_shm_op", no_shm_op), NOTE_MODULE: ("launch_build_note", no_build_note)}
"""Module: (its function, the stand-in set right after the module ran)."""


sys.meta_path.insert(0, StandIns(REPLACED))
