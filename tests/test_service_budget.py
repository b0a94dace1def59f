"""The tool service's bound on request bodies held at once (tools/service_budget.py): 64 pending requests of
256 MiB each could hold 16 GiB; now a body that does not fit the budget is a 503 "busy" the client retries."""

from __future__ import annotations

import io
import socket
import threading
import time

import numpy as np
import pytest
from service_helpers import HeldTracker, serve

from tools.motion import LKTracker
from tools.service import create_app
from tools.service_budget import DEFAULT_TOOL_BUSY_WAIT_S
from tools.settings import ToolSettings

NPY = {"content-type": "application/x-npy"}


def _npy_body(frames: int) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.zeros((frames, 128, 128, 3), np.uint8))  # 48 KiB a frame
    return buf.getvalue()


def test_a_body_past_the_buffered_bytes_limit_is_503_until_the_held_ones_are_done(service_root):
    import httpx

    blocking = HeldTracker()
    app = create_app(ToolSettings(), service_root, workers=1, tracker=blocking, enable_surprise=False,
                     max_upload_mb=1.0, max_buffered_mb=1.5, busy_wait_s=0)  # 0: the 503 comes at once
    body = _npy_body(16)  # 0.75 MiB: two do not fit in 1.5 MiB
    url_path = "/v1/track?grid_size=2"
    first: dict = {}
    with serve(app) as url:
        def post_first() -> None:
            first["r"] = httpx.post(url + url_path, content=body, headers=NPY, timeout=20)

        t = threading.Thread(target=post_first)
        t.start()
        assert blocking.entered.wait(10)
        busy = httpx.post(url + url_path, content=body, headers=NPY, timeout=20)
        small = httpx.get(url + "/v1/info", timeout=20)
        blocking.release.set()
        t.join(20)
        assert busy.status_code == 503, busy.text
        assert "busy" in busy.json()["detail"] and "max_buffered_mb" in busy.json()["detail"]
        assert float(busy.headers["retry-after"]) > 0  # when to try again: the client waits it
        assert first["r"].status_code == 200
        assert small.json()["max_buffered_bytes"] == int(1.5 * 2**20)
        again = httpx.post(url + url_path, content=body, headers=NPY, timeout=20)  # released: it fits now
        assert again.status_code == 200, again.text
        assert app.state.tools.bodies.held == 0


def _until(check) -> None:
    """Wait for a state the server reaches on its own (not a timing assertion: the deadline only ends a hang)."""
    deadline = time.monotonic() + 20
    while not check():
        assert time.monotonic() < deadline, "the server never reached the expected state"
        time.sleep(0.01)


def test_a_body_that_does_not_fit_waits_in_line_and_a_client_that_leaves_gives_up_its_place(service_root):
    """A body that does not fit waits for room (it was an immediate 503 the client's few seconds of retries
    could not outlast); a waiting client that disconnects leaves the line, so the next one is served."""
    import httpx

    blocking = HeldTracker()
    app = create_app(ToolSettings(), service_root, workers=2, tracker=blocking, enable_surprise=False,
                     max_upload_mb=1.0, max_buffered_mb=1.6, busy_wait_s=3600)
    bodies = app.state.tools.bodies
    body = _npy_body(16)  # 0.75 MiB: two fit in 1.6 MiB, one and 1 MiB do not
    url_path = "/v1/track?grid_size=2"
    answers: dict = {}
    with serve(app) as url:
        def post(name: str, content: bytes) -> None:
            answers[name] = httpx.post(url + url_path, content=content, headers=NPY, timeout=60)

        first = threading.Thread(target=post, args=("first", body))
        first.start()
        assert blocking.entered.wait(10)  # 0.75 MiB held until released
        host, port = url.removeprefix("http://").split(":")
        leaving = socket.create_connection((host, int(port)))  # declares 1 MiB, sends 1 KiB, then leaves
        leaving.sendall(b"POST " + url_path.encode() + b" HTTP/1.1\r\nhost: x\r\ncontent-type: application/x-npy"
                        b"\r\ncontent-length: " + str(2**20).encode() + b"\r\n\r\n" + bytes(1024))
        _until(lambda: bodies.waiting == 1)
        second = threading.Thread(target=post, args=("second", body))  # fits beside the first, but in line
        second.start()
        _until(lambda: bodies.waiting == 2)
        leaving.close()
        _until(lambda: bodies.waiting == 0)  # the leaver gave up its place: the second got the room
        assert "second" not in answers and bodies.held == 2 * len(body)
        blocking.release.set()
        first.join(30)
        second.join(30)
    assert answers["first"].status_code == 200 and answers["second"].status_code == 200, answers["second"].text
    assert bodies.held == 0


def test_the_buffered_limit_is_at_least_one_body_of_the_largest_size(service_root):
    with pytest.raises(ValueError, match="max_buffered_mb"):
        create_app(ToolSettings(), service_root, tracker=LKTracker(), enable_surprise=False,
                   max_upload_mb=8.0, max_buffered_mb=4.0)
    default = create_app(ToolSettings(), service_root, tracker=LKTracker(), enable_surprise=False,
                         max_upload_mb=4096.0)
    assert default.state.tools.bodies.limit == 4096 * 2**20  # the default 2 GiB grows to one largest body


def test_cli_max_buffered_mb(monkeypatch, service_root):
    """`raa serve-tools --max-buffered-mb` reaches the app; one below --max-upload-mb is refused before the
    models load."""
    import typer
    import uvicorn
    from typer.testing import CliRunner

    import tools.service
    from tools.cli import serve_tools_command

    seen, loads = {}, []
    monkeypatch.setattr(uvicorn, "run", lambda app, host, port, log_level, **kw: seen.update(app=app, **kw))
    real_load = tools.service.load_service_tools
    monkeypatch.setattr(tools.service, "load_service_tools", lambda *a, **k: loads.append(1) or real_load(*a, **k))
    app = typer.Typer()
    app.command()(serve_tools_command)
    args = ["--allowed-root", str(service_root), "--no-surprise"]
    ok = CliRunner().invoke(app, [*args, "--max-buffered-mb", "512"])
    assert ok.exit_code == 0, ok.output
    assert seen["app"].state.tools.bodies.limit == 512 * 2**20 and loads == [1]
    assert seen["app"].state.tools.bodies.wait_s == DEFAULT_TOOL_BUSY_WAIT_S
    ok = CliRunner().invoke(app, [*args, "--busy-wait-s", "5"])
    assert ok.exit_code == 0 and seen["app"].state.tools.bodies.wait_s == 5.0, ok.output
    bad = CliRunner().invoke(app, [*args, "--max-buffered-mb", "8", "--max-upload-mb", "16"])
    assert bad.exit_code == 2 and "max_buffered_mb" in bad.output and loads == [1, 1]
    nan = CliRunner().invoke(app, [*args, "--busy-wait-s", "nan"])
    assert nan.exit_code == 2 and "--busy-wait-s" in nan.output and loads == [1, 1]
    inf = CliRunner().invoke(app, [*args, "--busy-wait-s", "inf"])  # a usage error, before the models load
    assert inf.exit_code == 2 and "--busy-wait-s" in inf.output and loads == [1, 1]
    ok = CliRunner().invoke(app, [*args, "--body-timeout-s", "7.5"])  # the body-read deadline (408)
    assert ok.exit_code == 0 and seen["app"].state.tools.body_timeout_s == 7.5, ok.output
    inf = CliRunner().invoke(app, [*args, "--body-timeout-s", "inf"])
    assert inf.exit_code == 2 and "--body-timeout-s" in inf.output and loads == [1, 1, 1]
