"""A tracker or surprise scorer that runs out of memory on the tool service host.

A passing shortage (a CUDA out-of-memory while another worker's request holds the GPU, a MemoryError on the CPU) is
answered: the service runs the request again once, alone (no other request computing, the accelerator's cache
emptied). It was a 500 tool fault of kind "run", never retried, then a 503 machine fault the client retried,
also for a clip too large for the device, which failed the same way on every attempt, each a full run.

A shortage that repeats alone is the request's size for this device: a 413 whose fault (kind "too_large") names the
frame count and size and says what to send instead; the client raises it at once, never retrying."""

from __future__ import annotations

import threading
import time

import pytest
import torch
from fastapi.testclient import TestClient
from service_helpers import AUTH, NPY, TOKEN, moving_clip, npy, serve

from tools.client import RemoteMotionTracker, ToolServiceClient
from tools.errors import ToolFault, out_of_memory
from tools.motion import LKTracker
from tools.service import create_app
from tools.settings import ToolSettings


def _cuda_oom() -> BaseException:
    return torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")


class ShortOfMemory:
    """A tracker that runs out of memory `times` times (as CoTracker3 reports it: a ToolFault caused by the
    error, or the bare error as a tracker of one's own raises it), then tracks with LK."""

    def __init__(self, error, times: int, wrapped: bool = True) -> None:
        self.error, self.times, self.wrapped, self.calls = error, times, wrapped, 0

    def track(self, frames, *, grid_size=None, queries=None):
        self.calls += 1
        if self.calls <= self.times:
            exc = self.error()
            if not self.wrapped:
                raise exc
            raise ToolFault("motion", "run", f"cotracker3 failed: {type(exc).__name__}: {exc}") from exc
        return LKTracker().track(frames, grid_size=grid_size, queries=queries)


@pytest.mark.parametrize("wrapped", [True, False])
@pytest.mark.parametrize("error", [_cuda_oom, MemoryError], ids=["cuda", "cpu"])
def test_a_passing_out_of_memory_is_run_again_and_answered(service_root, error, wrapped):
    tracker = ShortOfMemory(error, 1, wrapped)
    app = create_app(ToolSettings(), service_root, token=TOKEN, tracker=tracker, enable_surprise=False)
    with TestClient(app) as c:
        r = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2}, headers=AUTH)
    assert r.status_code == 200, r.text
    assert tracker.calls == 2 and r.json()["tracks"]


@pytest.mark.parametrize("error", [_cuda_oom, MemoryError], ids=["cuda", "cpu"])
def test_an_out_of_memory_that_repeats_alone_is_a_413_naming_the_frames(service_root, error):
    tracker = ShortOfMemory(error, 99)
    app = create_app(ToolSettings(), service_root, token=TOKEN, tracker=tracker, enable_surprise=False)
    with TestClient(app) as c:
        r = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2}, headers=AUTH)
    assert r.status_code == 413, r.text
    assert "retry-after" not in r.headers
    fault = r.json()["fault"]
    assert fault["tool"] == "motion" and fault["kind"] == "too_large"
    assert "18 frames" in fault["message"] and "retry" not in fault["message"].replace("not retried", "")
    assert tracker.calls == 2  # once with the others, once alone


def test_the_client_raises_a_persistent_out_of_memory_at_once(service_root, monkeypatch):
    import tools.service_frames as frames

    monkeypatch.setattr(frames, "MACHINE_RETRY_AFTER_S", 0.01)
    tracker = ShortOfMemory(_cuda_oom, 99)
    app = create_app(ToolSettings(), service_root, token=TOKEN, tracker=tracker, enable_surprise=False)
    with serve(app) as url, ToolServiceClient(url, token=TOKEN, retries=3, backoff_s=0.01) as c:
        with pytest.raises(ToolFault) as info:
            RemoteMotionTracker(c).track(moving_clip(10), grid_size=2)
    assert info.value.tool == "motion" and info.value.kind == "too_large", info.value
    assert "10 frames of 64x64" in info.value.message
    assert tracker.calls == 2  # the service's own second try; the client did not send it again


class OutOfMemoryScorer:
    """A surprise scorer that always runs out of memory."""

    def __init__(self) -> None:
        self.calls = 0

    def score(self, frames):
        self.calls += 1
        raise _cuda_oom()


def test_a_scorer_out_of_memory_that_repeats_is_a_413_naming_the_frames(service_root):
    scorer = OutOfMemoryScorer()
    app = create_app(ToolSettings(), service_root, token=TOKEN, tracker=LKTracker(), scorer=scorer)
    with TestClient(app) as c:
        r = c.post("/v1/surprise", content=npy(moving_clip(20, 32, 48)), headers=NPY)
    assert r.status_code == 413, r.text
    fault = r.json()["fault"]
    assert fault["tool"] == "surprise" and fault["kind"] == "too_large" and "20 frames of 32x48" in fault["message"]
    assert "RAA_SURPRISE_BATCH" in fault["message"]  # its device memory is one batch of windows, not the clip
    assert scorer.calls == 2


class CrowdedTracker:
    """A tracker that runs out of memory when another run is in progress, and holds the first run it is given
    until `release` is set: memory held by another worker's request."""

    def __init__(self) -> None:
        self.running, self.calls, self.alone_calls = 0, 0, 0
        self.lock, self.entered, self.release = threading.Lock(), threading.Event(), threading.Event()

    def track(self, frames, *, grid_size=None, queries=None):
        with self.lock:
            self.running += 1
            self.calls += 1
            first, crowded = self.calls == 1, self.running > 1
        try:
            if first:
                self.entered.set()
                self.release.wait(10)
            elif crowded:
                raise _cuda_oom()
            else:
                self.alone_calls += 1
            return LKTracker().track(frames, grid_size=grid_size, queries=queries)
        finally:
            with self.lock:
                self.running -= 1


def test_the_second_try_waits_until_no_other_request_computes(service_root):
    tracker = CrowdedTracker()
    app = create_app(ToolSettings(), service_root, token=TOKEN, tracker=tracker, workers=2, enable_surprise=False)
    statuses: list[int] = []
    with serve(app) as url:
        import httpx

        def post() -> None:
            r = httpx.post(f"{url}/v1/track", json={"path": "clip.mp4", "grid_size": 2}, headers=AUTH, timeout=30)
            statuses.append(r.status_code)

        first = threading.Thread(target=post)
        first.start()
        assert tracker.entered.wait(10)
        second = threading.Thread(target=post)
        second.start()
        deadline = time.monotonic() + 10
        while tracker.calls < 2 and time.monotonic() < deadline:  # the second ran out of memory beside the first
            time.sleep(0.02)
        time.sleep(0.2)  # and waits for it: it must not run again while the first holds its slot
        assert tracker.calls == 2
        tracker.release.set()
        first.join(20)
        second.join(20)
    assert statuses == [200, 200] and tracker.alone_calls == 1 and tracker.calls == 3, (statuses, tracker.calls)


def test_out_of_memory_reads_the_cause_chain():
    try:
        try:
            raise _cuda_oom()
        except RuntimeError as exc:
            raise ToolFault("surprise", "run", "V-JEPA 2 surprise failed") from exc
    except ToolFault as fault:
        assert out_of_memory(fault)
    assert out_of_memory(MemoryError()) and not out_of_memory(RuntimeError("boom"))
    assert not out_of_memory(ToolFault("motion", "run", "out of memory"))  # words in a message are not the error


def test_a_tool_that_fails_otherwise_is_still_a_500_run_fault(service_root):
    app = create_app(ToolSettings(), service_root, token=TOKEN,
                     tracker=ShortOfMemory(lambda: RuntimeError("index out of range"), 1), enable_surprise=False)
    with TestClient(app) as c:
        r = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2}, headers=AUTH)
    assert r.status_code == 500 and r.json()["fault"]["kind"] == "run", r.text


@pytest.mark.parametrize("message", [
    "CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported at some other API call",
    "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
    "cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
])
def test_a_cuda_library_out_of_memory_is_one_too(message):
    """CUDA's own allocation failures outside PyTorch's allocator (cudaMalloc, a cuBLAS handle or cuDNN workspace
    while another request holds the GPU) are plain RuntimeErrors naming the CUDA status; they read as a tool's bug
    (a 500 "run" fault) although a second try alone succeeds."""
    try:
        try:
            raise RuntimeError(message)
        except RuntimeError as exc:
            raise ToolFault("motion", "run", f"cotracker3 failed: RuntimeError: {exc}") from exc
    except ToolFault as fault:
        assert out_of_memory(fault)
    assert not out_of_memory(RuntimeError("CUDA error: an illegal memory access was encountered"))
    assert not out_of_memory(ToolFault("motion", "run", message))  # a fault's own words are not the error
