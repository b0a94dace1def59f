"""A tracker or surprise scorer that runs out of memory on the tool service host (a CUDA out-of-memory while another
worker's request holds the GPU, a MemoryError on the CPU) is a 503 machine fault, which the client retries after its
``Retry-After``: it was a 500 tool fault of kind "run", never retried, so a clip met in a moment of memory pressure
was ineligible although the same request a second later would have been answered."""

from __future__ import annotations

import pytest
import torch
from fastapi.testclient import TestClient
from service_helpers import AUTH, TOKEN, serve

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
def test_a_tool_out_of_memory_is_a_503_machine_fault(service_root, error, wrapped):
    app = create_app(ToolSettings(), service_root, token=TOKEN, tracker=ShortOfMemory(error, 1, wrapped),
                     enable_surprise=False)
    with TestClient(app) as c:
        r = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2}, headers=AUTH)
    assert r.status_code == 503, r.text
    assert float(r.headers["retry-after"]) > 0
    fault = r.json()["fault"]
    assert fault["kind"] == "machine" and "out of memory" in fault["message"] and "motion" in fault["message"]


def test_a_tool_that_fails_otherwise_is_still_a_500_run_fault(service_root):
    app = create_app(ToolSettings(), service_root, token=TOKEN,
                     tracker=ShortOfMemory(lambda: RuntimeError("index out of range"), 1), enable_surprise=False)
    with TestClient(app) as c:
        r = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2}, headers=AUTH)
    assert r.status_code == 500 and r.json()["fault"]["kind"] == "run", r.text


def test_the_client_retries_a_tool_out_of_memory_and_gets_the_tracks(service_root, monkeypatch):
    import tools.service_frames as frames

    monkeypatch.setattr(frames, "MACHINE_RETRY_AFTER_S", 0.01)
    tracker = ShortOfMemory(_cuda_oom, 1)
    app = create_app(ToolSettings(), service_root, token=TOKEN, tracker=tracker, enable_surprise=False)
    with serve(app) as url, ToolServiceClient(url, token=TOKEN, retries=3, backoff_s=0.01) as c:
        answer = RemoteMotionTracker(c).track_path("clip.mp4", grid_size=2)
    assert tracker.calls == 2 and answer["tracks"]


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
