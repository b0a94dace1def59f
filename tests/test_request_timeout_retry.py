"""A 408 Request Timeout is retried by the service clients (tools/http_retry.py), a bounded number of times: both
services answer it when a request body does not arrive within ``body_timeout_s`` (tools/service_http.py), which
they read whole before any work, so nothing was computed. It was returned as the answer: the tool client raised
a transport fault, the reward client made the whole batch ineligible, for a slow upload the next attempt could
carry."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import numpy as np
import pytest

from tests.http_stubs import POLL_S, send_json
from tools.client import RemoteMotionTracker, ToolServiceClient
from tools.errors import ToolFault
from tools.http_retry import RetriesExhausted, send_with_retries
from tools.motion import LKTracker
from training.rewards import HttpAgentReward, call_reward

SLOW_BODY = {"detail": "the request body did not arrive within 0.5 s (10 bytes received; body_timeout_s)"}


class _SlowBodyStub(BaseHTTPRequestHandler):
    """A service that answers the first ``timeouts`` POSTs as the services answer a body that arrived too late
    (408, ``Connection: close``), then ``answer``; it records each request's body length."""

    timeouts = 0
    answer: dict = {}
    lengths: list[int] = []

    def do_POST(self):  # noqa: N802
        cls = type(self)
        cls.lengths.append(len(self.rfile.read(int(self.headers["Content-Length"]))))
        if cls.timeouts > 0:
            cls.timeouts -= 1
            data = json.dumps(SLOW_BODY).encode()
            self.send_response(408)
            self.send_header("Connection", "close")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.close_connection = True
            return
        send_json(self, cls.answer)

    def log_message(self, *args):
        pass


@contextmanager
def _stub(timeouts: int, answer: dict) -> Iterator[str]:
    handler = type("Stub", (_SlowBodyStub,), {"timeouts": timeouts, "answer": answer, "lengths": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, args=(POLL_S,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", handler
    finally:
        server.shutdown()
        server.server_close()


def _mock(statuses: list[int]) -> tuple[httpx.Client, list[int]]:
    sent: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(1)
        return httpx.Response(statuses[min(len(sent), len(statuses)) - 1], json={"detail": "x"})

    return httpx.Client(transport=httpx.MockTransport(handler), base_url="http://svc"), sent


def test_a_request_timeout_is_retried_and_the_retries_are_bounded():
    http, sent = _mock([408, 408, 200])
    sleeps: list[float] = []
    resp = send_with_retries(lambda: http.post("/v1/track", content=b"x"), retries=3, backoff_s=0.01,
                             sleep=sleeps.append)
    assert resp.status_code == 200 and len(sent) == 3 and sleeps == [0.01, 0.02]
    http, sent = _mock([408])
    with pytest.raises(RetriesExhausted, match=r"HTTP 408.*after 3 attempts"):
        send_with_retries(lambda: http.post("/v1/track", content=b"x"), retries=3, backoff_s=0.0, sleep=lambda s: None)
    assert len(sent) == 3


def test_the_tool_client_sends_the_whole_clip_again_after_a_408():
    """The streamed .npy body (`_NpyBody`) is sent whole again on the retry, and the answer is the service's."""
    frames = np.zeros((4, 8, 8, 3), dtype=np.uint8)
    tracks = LKTracker().track(frames, grid_size=2)
    with _stub(1, {"tracks": tracks.to_dict("base64")}) as (url, stub):
        with ToolServiceClient(url, retries=3, backoff_s=0.0) as client:
            got = RemoteMotionTracker(client).track(frames, grid_size=2)
    assert np.array_equal(got.tracks, tracks.tracks)
    assert len(stub.lengths) == 2 and stub.lengths[0] == stub.lengths[1] > frames.nbytes


def test_a_tool_request_timed_out_on_every_attempt_is_a_transport_fault_naming_the_408():
    with _stub(10, {}) as (url, stub):
        with ToolServiceClient(url, retries=2, backoff_s=0.0) as client:
            with pytest.raises(ToolFault) as info:
                client.request("POST", "/v1/track", json={"path": "clip.mp4", "grid_size": 2})
    assert len(stub.lengths) == 2 and info.value.kind == "transport"
    assert "HTTP 408" in info.value.message and "body_timeout_s" in info.value.message
    assert "after 2 attempts" in info.value.message


def test_the_reward_client_posts_a_batch_again_after_a_408():
    clips = [np.full((3, 16, 16, 3), 100, dtype=np.uint8) for _ in range(2)]
    results = {"results": [{"reward": 0.25, "reasons": []}, {"reward": 0.5, "reasons": []}]}
    with _stub(1, results) as (url, stub):
        fn = HttpAgentReward(url=f"{url}/v1/score", retries=3, backoff_s=0, startup_wait_s=0)
        out = call_reward(fn, "http", clips, ["a", "b"])
    assert out.rewards == [0.25, 0.5] and len(stub.lengths) == 2 and stub.lengths[0] == stub.lengths[1]
    with _stub(10, results) as (url, stub):
        fn = HttpAgentReward(url=f"{url}/v1/score", retries=3, backoff_s=0, startup_wait_s=0)
        out = call_reward(fn, "http", clips, ["a", "b"])
    assert out.rewards == [None, None] and out.kinds == ["error", "error"] and len(stub.lengths) == 3
    assert "HTTP 408" in fn.last_reasons[0][0] and "after 3 attempts" in fn.last_reasons[0][0]
