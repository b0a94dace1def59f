"""One value every rank agrees on: what rank 0 reads (training/best.py, training/run_dir.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def as_rank0_sees(read: Callable[[], T]) -> T:
    """``read()`` on rank 0 (which writes eval.jsonl and whose view of output_dir decides; other nodes may
    have no copy), broadcast to every rank (a collective when torch.distributed is initialised: call it on
    all ranks); ``read()`` itself without torch.distributed."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return read()
    box = [read() if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]
