"""One value every rank agrees on: what rank 0 reads (training/best.py, training/run_dir.py, training/resume.py,
training/engine.py).

Decision where the design was silent: when ``read()`` raises on rank 0, the exception is broadcast in place of
the value and every rank raises it (the same exception when it survives pickling, else a
:class:`Rank0ReadError` naming its type and text); rank 0 re-raises its own. Only rank 0 raising left the others
waiting in the broadcast (NCCL: until its timeout, or for good) or, when rank 0 went on to its next collective,
took that one's value as the answer to this one.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Rank0ReadError(RuntimeError):
    """What rank 0 could not read, raised on the other ranks when its exception could not be sent as it is."""


def _sendable(exc: Exception) -> Exception:
    """``exc`` when it comes back whole from pickling (what the broadcast does), else a Rank0ReadError with its
    type and text."""
    try:
        back = pickle.loads(pickle.dumps(exc))
    except Exception:  # an exception whose __init__ takes other arguments than it keeps, a lock in its args
        back = None
    return back if isinstance(back, Exception) else Rank0ReadError(f"rank 0: {type(exc).__name__}: {exc}")


def as_rank0_sees(read: Callable[[], T]) -> T:
    """``read()`` on rank 0 (which writes eval.jsonl and whose view of output_dir decides; other nodes may
    have no copy), broadcast to every rank (a collective when torch.distributed is initialised: call it on
    all ranks); ``read()`` itself without torch.distributed. An exception of ``read()`` is raised on every
    rank (module docstring)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return read()
    box: list[Any] = [None]
    raised: Exception | None = None
    if dist.get_rank() == 0:
        try:
            box = [("value", read())]
        except Exception as exc:
            raised = exc
            box = [("error", _sendable(exc))]
    dist.broadcast_object_list(box, src=0)
    if raised is not None:
        raise raised
    what, payload = box[0]
    if what == "error":
        raise payload
    return payload
