"""Local HTTP stubs of the tests: an ``http.server`` handler class served on 127.0.0.1 at a port the OS picks, on a
daemon thread (`start_server`, `served`), answering with `send_json`; `status_server` answers statuses in turn.
Light on purpose (no torch): the endpoint and reward-client tests import it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer

POLL_S = 0.02
"""How often a stub's ``serve_forever`` looks for its shutdown request: ``shutdown()`` waits for that look, and
socketserver's default (0.5 s) made every stub's exit an idle wait of up to half a second."""


def send_json(handler: BaseHTTPRequestHandler, obj: object, status: int = 200, *,
              content_type: str | None = None) -> None:
    """Answer an ``http.server`` request with ``obj`` as JSON (bytes: sent as they are), with a Content-Type
    header only when ``content_type`` is given."""
    data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    handler.send_response(status)
    if content_type is not None:
        handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def start_server(handler: type[BaseHTTPRequestHandler]) -> HTTPServer:
    """``handler`` served on 127.0.0.1 (a port the OS picks) by a daemon thread; the caller shuts it down."""
    server = HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, args=(POLL_S,), daemon=True).start()
    return server


@contextmanager
def served(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """The root URL (``http://127.0.0.1:PORT``) of ``handler`` served while the block runs (`start_server`)."""
    server = start_server(handler)
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def status_server(statuses: list[int]) -> tuple[HTTPServer, list[int]]:
    """A local HTTP server whose GETs answer the empty bodies of ``statuses`` in turn (the last one from then on),
    started on a daemon thread; (the server, the statuses it has sent). The caller shuts it down."""
    sent: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server API)
            status = statuses[min(len(sent), len(statuses) - 1)]
            sent.append(status)
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    return start_server(Handler), sent
