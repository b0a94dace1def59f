"""An answer whose body cannot be decoded (``Content-Encoding: gzip`` over bytes that are not gzip) raises
``httpx.DecodingError``, a ``RequestError`` but not a ``TransportError``: it escaped `send_with_retries`
(tools/http_retry.py) and the tool client's `request` / `check_serves` as a raw exception instead of a recorded
transport fault. A real HTTP server on loopback, no network."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from tests.http_stubs import POLL_S
from tools.client import ToolServiceClient
from tools.errors import ToolFault
from tools.http_retry import SendFailed, send_with_retries


class _BadGzip(BaseHTTPRequestHandler):
    """Answers every request 200 with a body claiming gzip that is not; counts the requests."""

    hits: list[int] = []

    def _answer(self) -> None:
        self.hits.append(1)
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        body = b"this is not gzip at all"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer  # noqa: N815

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def _bad_gzip_server() -> Iterator[tuple[str, list[int]]]:
    hits: list[int] = []
    handler = type("Handler", (_BadGzip,), {"hits": hits})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(POLL_S,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


def test_decoding_error_is_not_a_transport_error_in_the_installed_httpx():
    """Why it escaped: `_attempt` catches TransportError subclasses, and DecodingError is not one."""
    assert issubclass(httpx.DecodingError, httpx.HTTPError)
    assert not issubclass(httpx.DecodingError, httpx.TransportError)


def test_an_undecodable_answer_is_a_transport_fault_sent_once():
    """Not retried: the request went out whole and was answered, so the service did the work."""
    with _bad_gzip_server() as (url, hits), httpx.Client() as http:
        with pytest.raises(SendFailed) as err:
            send_with_retries(lambda: http.post(url + "/v1/track", content=b"x"), retries=3, backoff_s=0.01,
                              sleep=lambda s: None)
    assert err.value.kind == "transport"
    assert "DecodingError" in str(err.value) and "could not be decoded" in str(err.value)
    assert len(hits) == 1


def test_the_tool_client_records_an_undecodable_answer_as_a_fault():
    with _bad_gzip_server() as (url, _), ToolServiceClient(url, retries=2, backoff_s=0.01) as client:
        with pytest.raises(ToolFault) as err:
            client.info()
        assert (err.value.tool, err.value.kind) == ("service", "transport")
        assert "DecodingError" in err.value.message
        with pytest.raises(ToolFault) as err:
            client.check_serves("motion")
        assert (err.value.tool, err.value.kind) == ("motion", "load")
        assert "cannot be used" in err.value.message and "DecodingError" in err.value.message
