"""Keep-alive expiry of the clients of our services (tools/client.py, training/http_reward.py) against the
services' idle keep-alive (`raa serve-tools`, `raa serve-reward`). Both were httpx's and uvicorn's 5 s: a request
sent on a pooled connection just as the server closed it idle got "Server disconnected without sending a
response", a transport fault not retried (the request may have been computed; tools/http_retry.py), so the
clip was ineligible. The client now drops an idle connection well before the server would. Loopback only."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from tools.client import ToolServiceClient
from tools.errors import ToolFault
from tools.http_retry import CLIENT_KEEPALIVE_S, client_limits
from tools.service_http import SERVER_KEEPALIVE_S


def test_the_client_expiry_is_shorter_than_the_servers_idle_timeout():
    """With a margin for the time between the server sending an answer and the client reading it, and below
    uvicorn's own default too (a service started another way than `raa serve-*`)."""
    import uvicorn

    assert 0 < CLIENT_KEEPALIVE_S <= SERVER_KEEPALIVE_S - 1
    assert CLIENT_KEEPALIVE_S <= uvicorn.Config(app=None).timeout_keep_alive - 1
    assert client_limits().keepalive_expiry == CLIENT_KEEPALIVE_S


def _spy_clients(monkeypatch) -> list[httpx.Limits | None]:
    """Every httpx.Client built from now on records the limits it was given (None: httpx's defaults, 5 s)."""
    seen: list[httpx.Limits | None] = []
    real = httpx.Client

    class Spy(real):
        def __init__(self, *args, **kwargs):
            seen.append(kwargs.get("limits"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(httpx, "Client", Spy)
    return seen


class _Answers:
    """A raw HTTP/1.1 server on loopback answering every request 200 with ``body`` (JSON), keeping connections
    open; a request that arrives on a connection idle for more than ``idle_s`` is dropped unanswered, the
    connection closed: the outcome of the race where the server's idle close meets the client's request."""

    def __init__(self, body: dict, idle_s: float = 60.0) -> None:
        self.body, self.idle_s = json.dumps(body).encode(), idle_s
        self.connections = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        reader, last = conn.makefile("rb"), None  # idle only after an answer
        with conn, reader:
            while reader.readline():  # a request line
                length = 0
                while (header := reader.readline()) not in (b"\r\n", b""):
                    if header.lower().startswith(b"content-length:"):
                        length = int(header.split(b":")[1])
                reader.read(length)
                if last is not None and time.monotonic() - last > self.idle_s:
                    return  # dropped with the connection, unanswered
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(self.body)).encode() + b"\r\n\r\n" + self.body)
                last = time.monotonic()

    def close(self) -> None:
        self.sock.close()


@contextlib.contextmanager
def _answers(body: dict, idle_s: float = 60.0) -> Iterator[_Answers]:
    server = _Answers(body, idle_s)
    try:
        yield server
    finally:
        server.close()


def test_a_request_on_a_connection_the_server_closes_idle_is_a_transport_fault():
    """The failure: a client keeping connections longer than the server (httpx's default 5 s against a server
    that drops them after 0.4 s here) sends its next request on a connection the server is closing."""
    with _answers({"motion_backend": "lk"}, idle_s=0.4) as server, \
            ToolServiceClient(server.url, retries=3, backoff_s=0.01, keepalive_s=5.0) as client:
        assert client.info() == {"motion_backend": "lk"}
        time.sleep(0.7)
        with pytest.raises(ToolFault) as err:
            client.info()
    assert err.value.kind == "transport" and "not retried" in err.value.message


def test_a_client_expiry_below_the_servers_opens_a_fresh_connection():
    with _answers({"motion_backend": "lk"}, idle_s=0.4) as server, \
            ToolServiceClient(server.url, retries=1, backoff_s=0.01, keepalive_s=0.1) as client:
        assert client.info() == {"motion_backend": "lk"}
        time.sleep(0.7)
        assert client.info() == {"motion_backend": "lk"}
        assert server.connections == 2


def test_the_tool_client_uses_the_short_expiry_by_default(monkeypatch):
    seen = _spy_clients(monkeypatch)
    ToolServiceClient("http://127.0.0.1:9").close()
    assert [limits.keepalive_expiry if limits else None for limits in seen] == [CLIENT_KEEPALIVE_S]


def test_every_client_of_the_reward_service_uses_the_short_expiry(monkeypatch):
    from training.http_reward import HttpAgentReward

    with _answers({"results": [], "preset": "full"}) as server:
        reward = HttpAgentReward(url=server.url + "/v1/score", startup_wait_s=0, retries=1)
        seen = _spy_clients(monkeypatch)
        assert reward._post(reward.url_for(0), b"{}") == {"results": [], "preset": "full"}
        assert reward.service_info()[0][1] == {"results": [], "preset": "full"}
    assert len(seen) == 2
    assert [limits.keepalive_expiry if limits else None for limits in seen] == [CLIENT_KEEPALIVE_S] * 2
