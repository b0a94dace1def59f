"""A tool service request whose tracker or scorer ran out of memory (the host's, or the accelerator's:
`tools.errors.out_of_memory`): run once more alone, then told apart as too large for this device.

Decisions where the issues were silent:
- The first out-of-memory may be the other requests' doing (``workers`` > 1 share one GPU), or the request's own
  size. The service cannot tell them apart from the error, so it runs the request once more, alone: it gives its
  worker slot back, waits for all of them (`all_slots`, one request at a time so two such requests cannot each
  hold some slots while waiting for the rest), and empties the accelerator's cache (`release_memory`) first. A
  passing shortage is answered then.
- An out-of-memory alone is the request's size on this device: a 413 whose ``fault`` (the tool, kind
  ``too_large``) names what the request held (the jobs name the frames, `tools.service_jobs.sized_for`) and says
  what to do (`too_large`): the tracker holds the whole clip on the device (send fewer or smaller frames), V-JEPA 2
  one batch of windows whatever the clip's length (a smaller surprise batch for the service). It is never retried: the client raises the fault at once
  (tools/client.py). It was a 503 machine fault "retrying later can fix it": the client sent the clip again
  ``retries`` times, each one a full run that failed the same way, and the fault then told the user to retry.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from tools.errors import ToolFault
from tools.service_frames import HTTPProblem

_SEND_LESS = "send fewer frames (frame_indices) or smaller ones, or use a service on a device with more memory"
_REMEDY = {"surprise": "V-JEPA 2 holds one batch of windows on the device whatever the clip's length, so start the "
                       "service with a smaller batch (RAA_SURPRISE_BATCH) or on a device with more memory; the "
                       "frames themselves are held by the host (send fewer, frame_indices, if it ran out)"}
"""What to do about a request too large for the device, by tool (the tracker: `_SEND_LESS`)."""


@asynccontextmanager
async def all_slots(limiter: anyio.CapacityLimiter, turn: anyio.Lock) -> AsyncIterator[None]:
    """Hold every one of ``limiter``'s slots (waiting for the requests computing to finish), one holder at a time
    (``turn``): no other request computes meanwhile."""
    async with turn:
        borrowers: list[object] = []
        try:
            for _ in range(int(limiter.total_tokens)):
                borrower = object()
                await limiter.acquire_on_behalf_of(borrower)
                borrowers.append(borrower)
            yield
        finally:
            for borrower in borrowers:
                limiter.release_on_behalf_of(borrower)


def release_memory() -> None:
    """Free what a failed run left behind: unreachable objects (a traceback's cycles hold its tensors) and the
    blocks PyTorch's CUDA allocator keeps cached."""
    gc.collect()
    import torch  # only here: the tools that ran out of memory loaded it already

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def too_large(fault: ToolFault) -> HTTPProblem:
    """The 413 of a request whose tool ran out of memory even alone (module docstring); ``fault`` is that run's."""
    message = (f"{fault.message}: it ran out of memory again run alone on the service (no other request "
               f"computing), so the request is too large for this device; not retried: {_REMEDY.get(fault.tool, _SEND_LESS)}")
    return HTTPProblem(413, f"{fault.tool}: {message}", fault={"tool": fault.tool, "kind": "too_large",
                                                                "message": message})
