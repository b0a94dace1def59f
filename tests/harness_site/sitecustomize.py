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
import importlib.abc
import importlib.machinery
import signal
import sys
from types import ModuleType

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


class _StandIns(importlib.abc.MetaPathFinder):
    """Finds each module of `REPLACED` as the path finder does, and sets its function once the module has run."""

    def find_spec(self, name: str, path=None, target=None):  # noqa: ANN001 (the finder protocol's arguments)
        if name not in REPLACED:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module
        attribute, stand_in = REPLACED[name]

        def exec_module(module: ModuleType) -> None:
            run(module)
            setattr(module, attribute, stand_in)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _StandIns())
