"""A tiny OpenAI-compatible chat-completions server for tests (127.0.0.1, random port, no network).

`OpenAIStub` serves `POST /v1/chat/completions` (and, given `models`, `GET /v1/models`) from a scripted
queue of `StubReply` items (or a callable that builds a reply from the request body) and records every
request body it received.
Replies can carry JSON content, tool calls, an HTTP error status, a delay (to trigger client timeouts), or a
raw body that is no chat completion at all (a web page).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.http_stubs import POLL_S


@dataclass
class StubReply:
    """One scripted answer: a chat completion (content / tool calls) or an HTTP error status."""

    content: str | None = None
    """Assistant message content (already-serialised JSON for structured replies)."""
    tool_calls: list[tuple[str, dict[str, Any]]] | None = None
    """(function name, arguments) pairs returned as OpenAI tool calls."""
    status: int = 200
    """HTTP status; anything but 200 returns an OpenAI-style error body."""
    delay_s: float = 0.0
    """Seconds to sleep before answering (client timeouts)."""
    prompt_tokens: int = 11
    completion_tokens: int = 7
    finish_reason: str | None = None
    """The choice's finish_reason (None: "tool_calls" with tool calls, else "stop"); "length" = cut at max_tokens."""
    refusal: str | None = None
    """The message's `refusal` text (the model declined; content is then usually None)."""
    body: str | None = None
    """Sent as the whole HTTP body instead of a chat completion (with `content_type`): what a URL that is not
    an OpenAI-compatible endpoint answers with a 200 (a web page, a server root, another API's JSON)."""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    """Extra response headers (`Retry-After`, `x-should-retry`)."""


def json_reply(obj: Any, **kw: Any) -> StubReply:
    """A 200 reply whose content is `obj` serialised as JSON."""
    return StubReply(content=json.dumps(obj), **kw)


def tool_reply(name: str, args: dict[str, Any], **kw: Any) -> StubReply:
    """A 200 reply with one tool call and empty content."""
    return StubReply(content=None, tool_calls=[(name, args)], **kw)


def _completion(reply: StubReply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.refusal is not None:
        message["refusal"] = reply.refusal
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}
            for i, (name, args) in enumerate(reply.tool_calls)
        ]
    return {
        "id": "chatcmpl-stub", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": message,
                     "finish_reason": reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")}],
        "usage": {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                  "total_tokens": reply.prompt_tokens + reply.completion_tokens},
    }


@dataclass
class OpenAIStub:
    """Threaded stub server; use as a context manager. `base_url` ends with `/v1`."""

    replies: Iterable[StubReply] = ()
    responder: Callable[[dict[str, Any]], StubReply] | None = None
    """Builds the reply from the request body when the queue is empty (None: 400 'queue empty')."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    models: list[str] | None = None
    """Model ids `GET /v1/models` lists (None: that route answers 404, as a server without it)."""
    keep_alive: bool = True
    """Answer with HTTP/1.1 persistent connections, as vLLM and hosted APIs do (the client then pools them
    per event loop); False: HTTP/1.0, one connection per request."""

    def __post_init__(self) -> None:
        self._queue: deque[StubReply] = deque(self.replies)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def push(self, *replies: StubReply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def _next(self, body: dict[str, Any]) -> StubReply:
        with self._lock:
            self.requests.append(body)
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            return self.responder(body)
        return StubReply(status=400, content="stub reply queue is empty")

    @property
    def base_url(self) -> str:
        assert self._server is not None, "stub not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> OpenAIStub:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if stub.keep_alive else "HTTP/1.0"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server API)
                if stub.models is None or not self.path.endswith("/models"):
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in stub.models]})

            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                try:
                    reply = stub._next(body)
                except Exception as exc:  # noqa: BLE001 - a responder with no reply: say so (400, not retried)
                    reply = StubReply(status=400, content=f"stub responder failed: {type(exc).__name__}: {exc}")
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.body is not None:
                    self._send_raw(reply.status, reply.body.encode(), reply.content_type, reply.headers)
                    return
                if reply.status != 200:
                    self._send(reply.status, {"error": {"message": reply.content or f"status {reply.status}",
                                                        "type": "stub_error", "code": reply.status}}, reply.headers)
                    return
                self._send(200, _completion(reply, body.get("model", "stub")), reply.headers)

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                self._send_raw(status, json.dumps(payload).encode(), "application/json", headers)

            def _send_raw(self, status: int, data: bytes, content_type: str,
                          headers: dict[str, str] | None = None) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # client gave up (timeout tests)
                    pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                if not isinstance(sys.exc_info()[1], ConnectionError):  # a client closing a kept-alive connection
                    super().handle_error(request, client_address)

        self._server = Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, args=(POLL_S,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def script_responder(script: dict[str, Any]) -> Callable[[dict[str, Any]], StubReply]:
    """A stub `responder` answering like `graph.testing.ScriptedChatModel(script)` would, without state
    shared between requests (so concurrent runs, or runs in other processes, can use one stub): the
    request body is read back into LangChain messages, the stage comes from its `# stage:` line, and a
    list entry's k-th reply is chosen by k = the assistant messages already in the conversation (the
    inspect stage's tool rounds). A structured reply becomes the forced tool call when the request
    forces one (function_calling), else JSON content."""
    from langchain_core.messages import AIMessage, convert_to_messages

    from graph.testing import stage_from_messages

    def respond(body: dict[str, Any]) -> StubReply:
        messages = convert_to_messages(body["messages"])
        k = sum(isinstance(m, AIMessage) for m in messages)
        entry = script[stage_from_messages(messages)]
        reply = entry(messages, k) if callable(entry) else entry[min(k, len(entry) - 1)]
        if isinstance(reply, AIMessage):
            return StubReply(tool_calls=[(c["name"], c["args"]) for c in reply.tool_calls],
                             content=reply.text or None)
        if isinstance(reply, str):
            return StubReply(content=reply)
        if body.get("tools") and body.get("tool_choice"):
            return StubReply(tool_calls=[(body["tools"][0]["function"]["name"], reply)])
        return json_reply(reply)

    return respond
