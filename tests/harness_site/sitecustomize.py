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


def no_shm_op() -> None:
    """What ``deepspeed.comm.torch.build_shm_op`` answers where the op cannot be built."""
    return None


class _NoShmOp(importlib.abc.MetaPathFinder):
    """Finds ``deepspeed.comm.torch`` as the path finder does, and sets its ``build_shm_op`` once it has run."""

    def find_spec(self, name: str, path=None, target=None):  # noqa: ANN001 (the finder protocol's arguments)
        if name != SHM_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            module.build_shm_op = no_shm_op

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _NoShmOp())
