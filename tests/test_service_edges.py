"""Edges of both HTTP services (tools/service.py, graph/reward_service.py): the API docs behind the token, upload
errors that name the upload (not a server temp file), and a body-read deadline against slow clients."""

from __future__ import annotations

import socket
import tempfile
import time
from urllib.parse import urlparse

import pytest
from fastapi.testclient import TestClient
from service_helpers import AUTH, TOKEN, serve

from graph.reward_service import create_reward_app
from tools.motion import LKTracker
from tools.service import create_app
from tools.settings import ToolSettings

DOCS = ("/docs", "/redoc", "/openapi.json")


def _tools(root, **kw):
    return create_app(ToolSettings(), root, tracker=LKTracker(), enable_surprise=False, **kw)


def _apps(root, token):
    return {"tools": _tools(root, token=token), "reward": create_reward_app(object(), "decomposed", token=token)}


@pytest.mark.parametrize("which", ["tools", "reward"])
def test_api_docs_need_the_token_when_one_is_set(tmp_path, which):
    """/docs, /redoc and /openapi.json answered anyone, token or not (the route list of a guarded service)."""
    with TestClient(_apps(tmp_path, TOKEN)[which]) as c:
        assert [c.get(p).status_code for p in DOCS] == [404, 404, 401]
        assert [c.get(p, headers=AUTH).status_code for p in DOCS[:2]] == [404, 404]  # no HTML a browser could auth
        spec = c.get("/openapi.json", headers=AUTH)
        assert spec.status_code == 200 and "/v1/info" in spec.json()["paths"]
    with TestClient(_apps(tmp_path, None)[which]) as c:  # an open service keeps its docs
        assert [c.get(p).status_code for p in DOCS] == [200, 200, 200]


def test_an_upload_error_names_the_upload_not_a_server_temp_file(service_root):
    """A 400 / 422 for an uploaded clip named the service's temporary file (``/tmp/tmpab12.video``): a server
    path leaked to the client, and a name the client never sent."""
    data = (service_root / "clip.mp4").read_bytes()
    with TestClient(_tools(service_root)) as c:
        bad_index = c.post("/v1/track", files={"video": ("mine.mp4", data)},
                           data={"grid_size": "2", "frame_indices": "[0, 99]"})
        junk = c.post("/v1/track", files={"video": ("junk.mp4", b"not a video at all")}, data={"grid_size": "2"})
    for r, status, name in ((bad_index, 400, "mine.mp4"), (junk, 422, "junk.mp4")):
        detail = r.json()["detail"]
        assert r.status_code == status, r.text
        assert tempfile.gettempdir() not in detail and ".video" not in detail, detail
        assert f"uploaded clip {name!r}" in detail, detail


def _stall(url: str, head: str, first: bytes, wait_s: float = 5.0) -> tuple[bytes, float]:
    """Send a request's head and the start of its body, then nothing: (the answer, seconds it took)."""
    u = urlparse(url)
    with socket.create_connection((u.hostname, u.port), timeout=wait_s) as s:
        start = time.monotonic()
        s.sendall(head.encode() + b"\r\n" + first)
        answer = b""
        try:
            while chunk := s.recv(65536):
                answer += chunk
        except TimeoutError:
            pass
        return answer, time.monotonic() - start


def _heads(path: str, ctype: str) -> dict[str, str]:
    base = f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: {ctype}\r\n"
    return {"declared": base + "Content-Length: 100000\r\n", "chunked": base + "Transfer-Encoding: chunked\r\n"}


@pytest.mark.parametrize("kind", ["declared", "chunked"])
@pytest.mark.parametrize("which", ["tools", "reward"])
def test_a_body_sent_too_slowly_is_408_and_frees_its_room(tmp_path, which, kind):
    """uvicorn has no body-read timeout: a client that stopped sending its body held its budget room (and the tool
    service's pending slot) for as long as it kept the connection, so larger bodies waited behind it for nothing."""
    if which == "tools":
        app = _tools(tmp_path, token=TOKEN, body_timeout_s=0.5)
        path, ctype, counters = "/v1/track", "application/json", lambda: (app.state.tools.pending,
                                                                          app.state.tools.bodies.held)
    else:
        app = create_reward_app(object(), "decomposed", token=TOKEN, body_timeout_s=0.5)
        path, ctype, counters = "/v1/score", "application/json", lambda: (0, app.state.bodies.held)
    first = b'{"path": "' if kind == "declared" else b'a\r\n{"path": "\r\n'
    with serve(app) as url:
        answer, took = _stall(url, _heads(path, ctype)[kind], first)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert b"body_timeout_s" in answer and took < 4.0
        assert counters() == (0, 0)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_a_body_timeout_that_is_not_positive_and_finite_is_refused(tmp_path, bad):
    with pytest.raises(ValueError, match="body_timeout_s"):
        _tools(tmp_path, body_timeout_s=bad)
    with pytest.raises(ValueError, match="body_timeout_s"):
        create_reward_app(object(), "decomposed", body_timeout_s=bad)


@pytest.mark.parametrize("declared", [True, False])
def test_a_client_that_leaves_mid_body_is_499_not_a_server_error(declared):
    """starlette's ClientDisconnect escaped `read_body_limited`: every client that gave up during its upload (its
    timeout, Ctrl-C) was logged by the server as "Exception in ASGI application" with a traceback, a 500."""
    import asyncio

    from starlette.requests import Request

    from tools.service_budget import BodyBudget
    from tools.service_frames import HTTPProblem
    from tools.service_http import read_body_limited

    messages = [{"type": "http.request", "body": b"abc", "more_body": True}, {"type": "http.disconnect"}]

    async def receive() -> dict:
        return messages.pop(0)

    headers = [(b"content-length", b"100")] if declared else []
    request = Request({"type": "http", "method": "POST", "path": "/", "headers": headers}, receive)

    async def main() -> HTTPProblem:
        budget = BodyBudget(1000)
        with budget.reserve() as room, pytest.raises(HTTPProblem) as info:
            await read_body_limited(request, 1000, room, 5.0)
        assert budget.held == 0
        return info.value

    problem = asyncio.run(main())
    assert problem.status == 499 and "disconnected" in problem.detail


def test_a_multipart_upload_s_parsed_files_are_closed_once_read(service_root, monkeypatch):
    """The parsed form of a multipart request was never closed: its spooled copy of the upload (on disk past
    1 MiB) stayed open until garbage collection, longer when an error's traceback kept the frame alive."""
    from starlette.datastructures import FormData

    closed: list[int] = []
    real = FormData.close

    async def close(self) -> None:
        closed.append(1)
        await real(self)

    monkeypatch.setattr(FormData, "close", close)
    data = (service_root / "clip.mp4").read_bytes()
    with TestClient(_tools(service_root)) as c:
        ok = c.post("/v1/track", files={"video": ("c.mp4", data)}, data={"grid_size": "2"})
        bad = c.post("/v1/track", files={"video": ("c.mp4", data)}, data={"grid_size": "2", "queries": "[["})
    assert (ok.status_code, bad.status_code) == (200, 400) and closed == [1, 1]
