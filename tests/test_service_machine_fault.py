"""A clip the tool service's *machine* cannot read (an I/O error, too many open files, out of memory:
`tools.video_errors.machine_failed`) is a 503 machine fault that the client retries and names as such, not a 422
"undecodable video" blaming the clip (tools/service_frames.py)."""

from __future__ import annotations

import errno
import os

import av
import pytest
from fastapi.testclient import TestClient
from service_helpers import AUTH, TOKEN, serve

from tools.client import RemoteMotionTracker, RemoteSurpriseScorer, ToolServiceClient
from tools.errors import ToolFault
from tools.motion import LKTracker
from tools.service import create_app
from tools.settings import ToolSettings

MACHINE = [OSError(errno.EMFILE, "Too many open files"), OSError(errno.EIO, "Input/output error"), MemoryError()]


def _failing_open(failures: list[BaseException]):
    """``av.open`` raising each of ``failures`` in turn, then opening as usual."""
    real = av.open

    def fake(*args, **kwargs):
        if failures:
            raise failures.pop(0)
        return real(*args, **kwargs)

    return fake


@pytest.mark.parametrize("error", MACHINE, ids=lambda e: type(e).__name__ + str(getattr(e, "errno", "")))
@pytest.mark.parametrize("how", ["upload", "path"])
def test_a_read_the_machine_failed_is_a_503_machine_fault_not_an_undecodable_clip(service_root, monkeypatch,
                                                                                 error, how):
    monkeypatch.setattr(av, "open", _failing_open([error] * 10))
    app = create_app(ToolSettings(), service_root, token=TOKEN, tracker=LKTracker(), enable_surprise=False)
    with TestClient(app) as c:
        if how == "upload":
            data = (service_root / "clip.mp4").read_bytes()
            r = c.post("/v1/track", files={"video": ("c.mp4", data)}, data={"grid_size": "2"}, headers=AUTH)
        else:
            r = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2}, headers=AUTH)
    body = r.json()
    assert r.status_code == 503, r.text
    assert float(r.headers["retry-after"]) > 0
    assert "undecodable" not in body["detail"] and "not of the clip" in body["detail"]
    assert body["fault"]["kind"] == "machine" and type(error).__name__ in body["fault"]["message"]
    assert str(service_root) not in r.text  # the path request's clip is named relative to the root
    assert ("uploaded clip 'c.mp4'" if how == "upload" else "clip.mp4") in body["detail"]


def test_ffmpegs_io_error_on_a_clip_that_reads_back_is_422_not_a_machine_fault(service_root, monkeypatch):
    """FFmpeg's EIO on a clip whose bytes all read back (the Matroska demuxer's word for an element it cannot parse) is
    the clip's: it was a 503 machine fault, which the client retried and reported as a tool failure."""
    monkeypatch.setattr(av, "open", lambda target, *a, **k: av.error.err_check(-errno.EIO, str(target)))
    app = create_app(ToolSettings(), service_root, token=TOKEN, tracker=LKTracker(), enable_surprise=False)
    with TestClient(app) as c:
        r = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2}, headers=AUTH)
    assert r.status_code == 422 and "undecodable" in r.json()["detail"] and "fault" not in r.json()


def test_a_clip_that_is_not_a_video_is_still_422(service_root):
    app = create_app(ToolSettings(), service_root, token=TOKEN, tracker=LKTracker(), enable_surprise=False)
    with TestClient(app) as c:
        r = c.post("/v1/track", json={"path": "junk.mp4", "grid_size": 2}, headers=AUTH)
    assert r.status_code == 422 and "undecodable" in r.json()["detail"] and "fault" not in r.json()


def test_the_client_names_a_machine_fault_that_outlasts_its_retries(service_root, monkeypatch):
    """End to end: the client's ToolFault says the service host failed (kind "machine") and that a retry can fix it;
    it was ToolFault("service", "input", "HTTP 422: undecodable video ..."): the clip's fault."""
    import tools.service_frames as frames

    monkeypatch.setattr(frames, "MACHINE_RETRY_AFTER_S", 0.01)
    monkeypatch.setattr(av, "open", _failing_open([OSError(errno.EMFILE, "Too many open files")] * 50))
    app = create_app(ToolSettings(), service_root, token=TOKEN, tracker=LKTracker(), enable_surprise=False)
    with serve(app) as url, ToolServiceClient(url, token=TOKEN, retries=2, backoff_s=0.01) as c:
        with pytest.raises(ToolFault) as info:
            RemoteMotionTracker(c).track_path("clip.mp4", grid_size=2)
    fault = info.value
    assert fault.kind == "machine" and fault.tool == "service"
    assert "Too many open files" in fault.message and "not of the clip" in fault.message
    assert "2 attempts" in fault.message and "retry" in fault.message
    assert "input" not in str(fault).split(":")[0]


def test_the_client_retries_a_machine_fault_and_gets_the_answer(service_root, monkeypatch, service_scorer):
    import tools.service_frames as frames

    monkeypatch.setattr(frames, "MACHINE_RETRY_AFTER_S", 0.01)
    clip = service_root / "clip.mp4"
    app = create_app(ToolSettings(), service_root, token=TOKEN, tracker=LKTracker(), scorer=service_scorer)
    with serve(app) as url, ToolServiceClient(url, token=TOKEN, retries=3, backoff_s=0.01) as c:
        want = RemoteSurpriseScorer(c).score_file(clip, frames=16)
        failures: list[BaseException] = [OSError(errno.EIO, "Input/output error")]
        monkeypatch.setattr(av, "open", _failing_open(failures))
        assert RemoteSurpriseScorer(c).score_file(clip, frames=16) == want
        assert not failures  # the first attempt met the I/O error, the retry read the clip


def test_a_remote_machine_fault_is_retried_by_score_batch(service_root):
    """The reason the agent records for the client's machine fault is one `--retry-ineligible` scores again."""
    from graph.batch_retry import retryable
    from graph.nodes.common import to_fault

    fault = to_fault("surprise", ToolFault("service", "machine", "/v1/surprise: uploaded clip 'c.mp4' could not be "
                                                                 "read on the service host"))
    result = {"status": "ineligible", "reasons": [fault.reason()]}
    assert retryable(result, str(service_root / "clip.mp4"))


def test_an_upload_the_host_cannot_write_or_frames_it_cannot_hold_are_machine_faults(service_root, monkeypatch):
    """Too many open files for the upload's temporary file, memory short for frames within max_decode_mb: the
    host's faults (503 "machine"); they were 500 tool faults of the tracker ("run")."""
    import tempfile

    from tools.video import VideoReader

    def no_file(*args, **kwargs):
        raise OSError(errno.EMFILE, "Too many open files")

    def no_memory(*args, **kwargs):
        raise MemoryError

    data = (service_root / "clip.mp4").read_bytes()
    app = create_app(ToolSettings(), service_root, token=TOKEN, tracker=LKTracker(), enable_surprise=False)
    for target, name, fake in ((tempfile, "mkstemp", no_file), (VideoReader, "read", no_memory)):
        with monkeypatch.context() as m, TestClient(app) as c:
            m.setattr(target, name, fake)
            r = c.post("/v1/track", files={"video": ("c.mp4", data)}, data={"grid_size": "2"}, headers=AUTH)
        assert r.status_code == 503 and r.json()["fault"]["kind"] == "machine", r.text
        assert "uploaded clip 'c.mp4'" in r.json()["detail"] and "/tmp" not in r.text


@pytest.mark.parametrize(("code", "status", "kind"), [(errno.EMFILE, 503, "machine"), (errno.ENOSPC, 500, "run")])
def test_an_upload_the_host_cannot_spool_is_a_fault_of_the_host_with_its_reason(service_root, monkeypatch, code,
                                                                               status, kind):
    """Starlette spools a multipart upload to a temporary file; an OSError there escaped the request as a bare 500
    "Internal Server Error", which the client reported as a transport fault with no reason."""
    from starlette.datastructures import UploadFile

    async def fail(self, data):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(UploadFile, "write", fail)
    data = (service_root / "clip.mp4").read_bytes()
    app = create_app(ToolSettings(), service_root, token=TOKEN, tracker=LKTracker(), enable_surprise=False)
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.post("/v1/track", files={"video": ("c.mp4", data)}, data={"grid_size": "2"}, headers=AUTH)
    assert r.status_code == status, r.text
    fault = r.json()["fault"]
    assert fault["kind"] == kind and os.strerror(code) in fault["message"] and "upload" in fault["message"]


def test_a_clip_the_service_may_not_read_is_unreadable_not_undecodable(service_root, monkeypatch):
    """A PermissionError (the clip's mode, its folder's) says nothing of the clip's bytes: the 422 read "undecodable
    video", which sends a user to re-render a good clip; it now reads "unreadable video" with the error."""
    monkeypatch.setattr(av, "open", _failing_open([PermissionError(errno.EACCES, "Permission denied")] * 10))
    app = create_app(ToolSettings(), service_root, token=TOKEN, tracker=LKTracker(), enable_surprise=False)
    with TestClient(app) as c:
        r = c.post("/v1/track", json={"path": "clip.mp4", "grid_size": 2}, headers=AUTH)
    detail = r.json()["detail"]
    assert r.status_code == 422 and detail.startswith("unreadable video: ") and "PermissionError" in detail, r.text
