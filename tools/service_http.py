"""HTTP pieces both services share (tools/service.py, graph/reward_service.py): the bearer token check, the
API docs behind it, error answers and reading a request body within its limits.

Decisions where the issues were silent:
- API docs: with a token, ``/docs`` and ``/redoc`` are disabled (404) and ``/openapi.json`` needs the token like
  ``/v1/*``. They answered anyone, a guarded service's route list included. Swagger UI and ReDoc load the spec
  from the browser without a bearer header, so behind a token they could only show an error: disabled rather
  than half working; ``curl -H "Authorization: Bearer ..." /openapi.json`` still gets the spec. Without a token
  (an open service) all three stay.
- Body-read deadline: a body must arrive within ``body_timeout_s`` (default ``DEFAULT_BODY_TIMEOUT_S``, 300 s:
  2 GiB, the reward service's largest body, at ~60 Mbit/s; ``--body-timeout-s`` of `raa serve-tools` and
  `raa serve-reward`) from when its room in the body budget was granted (the wait in line for room is
  ``busy_wait_s``'s); past it the answer is a 408 naming the option, with ``Connection: close``, and the
  request's room (and the tool service's pending slot) is released. uvicorn has no body-read timeout: a client
  that stopped sending held its room for as long as it kept the connection open, and a chunked body held what
  it had taken while a large declared body waited in line behind it.
- A client that disconnects while sending its body (its timeout, Ctrl-C) is a 499 (never read), like one that
  leaves while waiting for room: starlette's ``ClientDisconnect`` escaped as a server error, logged with a
  traceback as "Exception in ASGI application" for every abandoned upload.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import MutableMapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.requests import ClientDisconnect

from tools.service_budget import DEFAULT_BODY_TIMEOUT_S, Reservation, body_chunks, watch_disconnect
from tools.service_frames import HTTPProblem

SERVER_KEEPALIVE_S = 15
"""Seconds `raa serve-tools` and `raa serve-reward` keep an idle connection open (uvicorn's
``timeout_keep_alive``, 5 s by default): longer than their clients keep one (`tools.http_retry.CLIENT_KEEPALIVE_S`),
so a client never sends a request on a connection the service is closing idle."""


def check_body_timeout(body_timeout_s: float) -> float:
    """``body_timeout_s`` as a float, or ValueError unless it is positive and finite (NaN included)."""
    value = float(body_timeout_s)
    if not 0 < value < float("inf"):
        raise ValueError(f"body_timeout_s must be positive and finite, got {body_timeout_s!r}")
    return value


def check_bearer(request: Request, token: str | None) -> None:
    """401 unless the request carries ``Authorization: Bearer <token>`` (no token configured: open)."""
    if token is None:
        return
    auth = request.headers.get("authorization", "")
    given = auth[7:] if auth.lower().startswith("bearer ") else ""
    if not hmac.compare_digest(given.encode(), token.encode()):
        raise HTTPProblem(401, "missing or wrong bearer token")


def docs_options(token: str | None) -> dict[str, Any]:
    """`FastAPI` keyword arguments for the API docs: none with a token (module docstring; see `add_openapi_route`)."""
    return {"docs_url": None, "redoc_url": None, "openapi_url": None} if token else {}


def add_openapi_route(app: FastAPI, token: str | None) -> None:
    """With a token, ``GET /openapi.json`` behind it (`docs_options` removed FastAPI's open one)."""
    if not token:
        return

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi(request: Request) -> dict:
        check_bearer(request, token)
        return app.openapi()


def problem_response(exc: HTTPProblem) -> JSONResponse:
    """The JSON answer of an HTTPProblem (``detail`` plus its extra fields, its headers; 401 names the auth
    scheme)."""
    headers = {**exc.headers, **({"WWW-Authenticate": "Bearer"} if exc.status == 401 else {})}
    return JSONResponse({"detail": exc.detail, **exc.extra}, status_code=exc.status, headers=headers)


async def read_body_limited(request: Request, limit: int, room: Reservation | None = None,
                            timeout_s: float = DEFAULT_BODY_TIMEOUT_S, too_large: str = "") -> bytes:
    """The whole request body, or 413 (its detail ending in ``too_large``, when given) as soon as it exceeds
    ``limit`` bytes. ``room`` (a
    `tools.service_budget.BodyBudget` reservation) is told of the bytes held: the declared length before
    reading (waiting in line for room, 499 if the client leaves meanwhile), then whatever the body holds
    beyond it; it raises to refuse them. 408 when the body has not arrived ``timeout_s`` after its room was
    granted, 499 when the client disconnects before the body ends (module docstring)."""
    declared = request.headers.get("content-length")
    reserved = 0
    early: list[MutableMapping[str, Any]] = []
    if declared and declared.isdigit():
        if int(declared) > limit:
            raise HTTPProblem(413, f"request body of {int(declared)} bytes exceeds the limit of {limit} bytes"
                                   + (f": {too_large}" if too_large else ""))
        if room is not None:
            await room.wait_take(int(declared), watch_disconnect(request.receive, early))
            reserved = int(declared)
    chunks, size = [], 0
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in body_chunks(early, request.stream()):
                size += len(chunk)
                if size > limit:
                    raise HTTPProblem(413, f"request body exceeds the limit of {limit} bytes"
                                           + (f": {too_large}" if too_large else ""))
                if room is not None and size > reserved:
                    room.take(size - reserved)
                    reserved = size
                chunks.append(chunk)
    except ClientDisconnect as exc:  # nobody reads the answer; not a server error (module docstring)
        raise HTTPProblem(499, f"the client disconnected while sending its body ({size} bytes received)") from exc
    except TimeoutError as exc:
        raise HTTPProblem(408, f"the request body did not arrive within {timeout_s:g} s ({size} bytes received; "
                               "body_timeout_s)", headers={"Connection": "close"}) from exc
    return b"".join(chunks)
