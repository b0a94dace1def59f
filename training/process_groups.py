"""A training run's process groups: started (`start_process_group`) and, after the run, freed while the
interpreter is whole (`free_process_groups`).

``destroy_process_group`` (training/run_end.py ``finish``; training/train.py ``release_process_group``) drops
torch's and DeepSpeed's own references to the groups, but gloo joins a group's threads only when the group object
itself is freed. A group still referenced kept its worker threads into interpreter teardown, where a worker
dropping the last reference to a finished collective's tensors needs the GIL; the interpreter ends a thread that
asks for it then, through a C++ frame, and the process aborted (``terminate called without an active
exception``, exit -6, now and then on a loaded machine) after the run had printed ``done``. Two references
outlived the run:

* torch.distributed.nn, whose functions take ``group.WORLD`` as a default argument, evaluated at import: imported
  by diffusers (torch._dynamo, FSDP) after the group started, it held the world group for the life of the
  process. It is imported before the group starts, when ``group.WORLD`` is None (the default group at call time);
* DeepSpeed's engine and ZeRO optimizer hold the data-parallel group (as does each parameter they manage) in
  reference cycles, freed by the next garbage collection, most often the one of interpreter teardown.
"""

from __future__ import annotations

import gc


def start_process_group(use_cuda: bool) -> None:
    """The run's process group (NCCL on CUDA, else gloo), as DeepSpeed starts it; torch.distributed.nn imported
    first, so that no function of it holds the group (module docstring)."""
    import deepspeed
    import torch.distributed.nn  # noqa: F401 (imported for its default arguments: before the group exists)

    deepspeed.init_distributed(dist_backend="nccl" if use_cuda else "gloo")


def free_process_groups() -> None:
    """After the run returned or raised (its engine no longer referenced by a frame or a traceback): collect the
    reference cycles that still hold destroyed groups, so that torch frees them now, joining gloo's threads,
    instead of at interpreter teardown (module docstring)."""
    gc.collect()
