"""Typed errors shared by the evidence tools, and the memory of a failed model load.

`ToolFault` is raised when a configured evidence tool (motion tracker, surprise scorer, tool
service) cannot load or run. The reward agent turns it into a `Fault` record and an
ineligible result: there is never a silent switch to another backend, and never a model-only
fallback.

`LoadFailureMemo`: a model that failed to load (weights missing, no network for a hub id) is not
tried again for `retry_after_s` seconds (default 60); calls in between fail at once with the same
reason. Decision where the issues were silent: without it every clip of a batch re-ran the failing
load (a hub id without network spends ~20 s in huggingface_hub's retries), one clip after another
behind the load lock, only to record the same fault; after the pause one call tries again, so a
transient failure still recovers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class ToolFault(RuntimeError):
    """A required evidence tool failed to load or run.

    Attributes:
        tool: short tool name ("motion", "surprise", "quality", "service").
        kind: failure kind ("load", "run"; the tool service's, `tools.client`: "transport", "timeout", "auth",
            "config" (a setting to fix: the URL, a limit of the service's setup), "input" (a request it cannot
            process), "machine", "too_large"). The agent records every one as kind "tool", an outage.
    """

    def __init__(self, tool: str, kind: str, message: str) -> None:
        super().__init__(f"{tool} tool {kind} failure: {message}")
        self.tool = tool
        self.kind = kind
        self.message = message


def run_tool(tool: str, call: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``call(*args, **kwargs)`` of a tool given decoded frames (a tracker, an in-process scorer, an extra tool);
    any failure other than a ToolFault is raised as ToolFault(tool, "run", "<type>: <message>"): a configured tool
    that fails is a fault, never a silent skip. A VideoError such a tool raises is its own too: the clip was decoded
    before the call, so a FrameIndexError is the tool indexing its frames wrongly (it was the agent's "internal"
    fault) and a VideoDecodeError something else the tool read (it was the clip's final video fault)."""
    return _run(tool, call, args, kwargs, clip_errors=False)


def run_clip_tool(tool: str, call: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """`run_tool` for a tool handed the clip itself, which reads it as the in-process read does (the tool service
    decoding an upload, `tools.client.RemoteSurpriseScorer.score_file`): a VideoError it raises is the clip's (not
    found, a folder, undecodable: the clip's video fault), raised as it is; a FrameIndexError is still the tool's
    (the indices are the call's, not the clip's)."""
    return _run(tool, call, args, kwargs, clip_errors=True)


def _run(tool: str, call: Callable[..., T], args: tuple, kwargs: dict, *, clip_errors: bool) -> T:
    try:
        return call(*args, **kwargs)
    except ToolFault:
        raise
    except Exception as exc:
        if clip_errors:
            from tools.video_errors import FrameIndexError, VideoError  # lazy: PyAV is only needed here

            if isinstance(exc, VideoError) and not isinstance(exc, FrameIndexError):
                raise
        raise ToolFault(tool, "run", f"{type(exc).__name__}: {exc}") from exc


CUDA_ALLOCATION_FAILED = ("CUDA error: out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "CUDNN_STATUS_ALLOC_FAILED")
"""The CUDA statuses of an allocation that failed outside PyTorch's caching allocator (cudaMalloc itself, a cuBLAS
handle, a cuDNN workspace): torch raises them as plain RuntimeErrors naming the status."""


def out_of_memory(exc: BaseException) -> bool:
    """Whether `exc` or an exception it was raised from (``__cause__``, ``__context__``) is an out-of-memory:
    a MemoryError, torch's out-of-memory of an accelerator (``torch.OutOfMemoryError``, which CUDA's is), or a
    RuntimeError of torch naming a failed CUDA allocation (`CUDA_ALLOCATION_FAILED`: under memory held by another
    request they read as the tool's bug). The trackers and the scorer raise a ToolFault from what their model
    raised, so the chain is where it shows; a ToolFault's own message is never read."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, MemoryError):
            return True
        if isinstance(current, RuntimeError) and not isinstance(current, ToolFault):
            import torch  # only here: the tools that raise it loaded it already

            if isinstance(current, torch.OutOfMemoryError) or any(s in str(current) for s in CUDA_ALLOCATION_FAILED):
                return True
        current = current.__cause__ or current.__context__
    return False


class LoadFailureMemo:
    """The last load failure of one model, remembered for `retry_after_s` seconds (0 = never).

    Not thread-safe on its own: call it under the lock that serialises the load."""

    def __init__(self, retry_after_s: float = 60.0, *, clock: Callable[[], float] = time.monotonic) -> None:
        if retry_after_s < 0:
            raise ValueError(f"retry_after_s must be >= 0, got {retry_after_s}")
        self.retry_after_s = retry_after_s
        self._clock = clock
        self._fault: ToolFault | None = None
        self._at = 0.0

    def check(self) -> None:
        """Raise the remembered fault (with its age) while the pause lasts; otherwise return."""
        if self._fault is None:
            return
        age = self._clock() - self._at
        if age < self.retry_after_s:
            f = self._fault
            raise ToolFault(f.tool, f.kind, f"{f.message} (failed {age:.0f} s ago; not retried for another "
                                            f"{self.retry_after_s - age:.0f} s)")

    def record(self, fault: ToolFault) -> ToolFault:
        """Remember `fault` as of now and return it (for `raise memo.record(fault)`)."""
        self._fault, self._at = fault, self._clock()
        return fault
