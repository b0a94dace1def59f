"""Which failed requests the service clients send again (`send_with_retries`): the tool service's client
(tools/client.py) and the reward service's (training/http_reward.py, `HttpAgentReward`).

Both services do expensive work per request (a tracker or V-JEPA 2 run; a batch of agent runs, minutes), and
neither request is idempotent in cost: a request sent twice is computed twice. So the rule is whether the
service can have started the work, not whether the failure looks transient:
- Retried: the request never reached the service whole, so nothing was computed (``RETRY_ERRORS``): the
  connection could not be made (``ConnectError``, ``ConnectTimeout``), no pooled connection came in time
  (``PoolTimeout``), or sending the request failed or stalled (``WriteError``, ``WriteTimeout``: a write that
  failed or did not finish in time means the service never got the whole body, and both services read the
  whole body before any work; a server waiting for room for a body pauses reading it, tools/service_budget.py).
  A ``WriteTimeout`` was reported as "no answer in time; not retried, since the service would compute the
  request again", which it cannot have started. And the answers by which a
  server says it did not take the request on (``RETRY_STATUS``): 429 and 503 (RFC 9110: the server is
  unable to handle it now; the services' "busy"), and 408 Request Timeout (RFC 9110 15.5.9: the server did
  not receive the whole request in the time it was prepared to wait; "the client MAY repeat that request").
  The tool service's 503 for a clip its machine failed to read (tools/service_frames.py) is retried too: no
  tool ran on it, and a retry is what fixes it; the last such answer is ``RetriesExhausted.response``.
  Both services answer 408 when a body has not arrived ``body_timeout_s`` after its room was granted
  (tools/service_http.py), and they read the whole body before any work, so a 408 is a request never
  computed, like a ``WriteTimeout``; so is a proxy's 408 (it never got the body to forward it whole). The
  requests here are POSTs, not idempotent in cost (above): the 408 is retried for what it says of this
  request, not for its method, and a GET (``/v1/info``) is retried the same way. It was returned as the
  answer: a transport fault of the tool, or an ineligible batch, for an upload the next attempt could carry.
  A 408 caused by the client's own slow link may come again: the attempts (``retries``, the first included)
  bound it, as for a busy answer, and the last 408 is named by ``RetriesExhausted``. The ``Retry-After`` of
  these answers (seconds or an HTTP date) is the wait before the next attempt, at most ``max_wait_s``;
  without one (or an unusable one; a 408 usually has none) the wait is the exponential backoff from
  ``backoff_s``.
- Not retried: the request went out whole and its answer was lost, so the service may have done the work,
  or still be doing it: a read timeout (kind ``timeout``), a connection broken while waiting for the answer
  (``ReadError``, ``RemoteProtocolError`` "Server disconnected without sending a response"), and a gateway's
  502 / 504 (a proxy forwarded the request; 504 means it stopped waiting while the service goes on). They
  were retried: each retry added one more full computation behind the same worker slots (3 attempts: three
  tracker runs, or a batch of clips scored three times). A 502 / 504 is returned as the answer it is (the
  caller maps 504 to kind ``timeout``); the broken connection is ``SendFailed("transport")`` saying it was not
  retried. The price is a keep-alive connection the server closes just as a request goes out on it: httpcore
  drops a pooled connection the server has closed before reusing it, which leaves a narrow race, reported as
  a transport fault (the clip's tool fault, or an ineligible batch counted as an outage), never as a reward.
  The clients keep idle connections shorter than the services do (`CLIENT_KEEPALIVE_S`), so an idle close
  by the service no longer meets a request; a proxy closing sooner can still race.
- Not retried either: an answer whose body cannot be decoded (``DecodingError``: a ``Content-Encoding`` its
  bytes do not follow, from the service or a proxy). It is a ``RequestError`` but not a ``TransportError``, so it
  escaped as a raw exception (the tool client's `check_serves` and `request` too) instead of ending as a
  transport fault; the service answered, so it computed the request.
- Not retried either, and said to be unsent: ``LocalProtocolError``, the client's own HTTP layer refusing the
  request before anything left (a header value it cannot carry); the same request fails the same way.
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Callable
from datetime import UTC

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

CLIENT_KEEPALIVE_S = 2.0
"""Seconds the clients of our services keep an idle pooled connection (`client_limits`): shorter than the
services' idle keep-alive (`tools.service_http.SERVER_KEEPALIVE_S`, and uvicorn's default 5 s for a service
started another way), so the client drops a connection before the server closes it. Both were 5 s (httpx's
and uvicorn's defaults): a request sent as the server closed the idle connection was lost, a transport fault
not retried (module docstring), and the clip ineligible."""


def client_limits(keepalive_s: float = CLIENT_KEEPALIVE_S) -> httpx.Limits:
    """httpx's default pool limits (100 connections, 20 kept) with the keep-alive expiry ``keepalive_s``."""
    return httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=keepalive_s)


RETRY_STATUS = frozenset({408, 429, 503})
"""Answers by which the server says it did not take the request on (408: its body never arrived whole): retried
(module docstring)."""

RETRY_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.WriteError, httpx.WriteTimeout)
"""Transport errors retried: the request never reached the service whole (module docstring)."""


class SendFailed(RuntimeError):
    """A request that got no answer to return; ``kind`` (a ToolFault kind) says why: "transport" (the
    connection failed), "timeout" (no answer in time) or "config" (the URL cannot be requested); only a
    request never delivered is retried first (module docstring)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class RetriesExhausted(SendFailed):
    """Every attempt of a request failed in a retried way; the message names the last failure and the count,
    ``response`` is the last attempt's answer (None when it got none) and ``attempts`` their number."""

    def __init__(self, message: str, response: httpx.Response | None = None, attempts: int = 0) -> None:
        super().__init__("transport", message)
        self.response, self.attempts = response, attempts


class _Retryable(Exception):
    """One attempt's failure that is sent again; ``wait_s`` is the wait its answer asked for, if any, and
    ``response`` that answer (None for a request that got none)."""

    def __init__(self, message: str, wait_s: float | None = None, response: httpx.Response | None = None) -> None:
        super().__init__(message)
        self.wait_s, self.response = wait_s, response


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """The wait (seconds) a ``Retry-After`` header value asks for: a number of seconds or an HTTP date; None
    when absent or unusable (not a number or date, not above 0, not finite: the backoff applies then, as
    graph/transport.py reads the model server's)."""
    if not value or not value.strip():
        return None
    try:
        asked = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # the asctime form (or "-0000"): HTTP dates are GMT, not local time
            when = when.replace(tzinfo=UTC)
        asked = when.timestamp() - (time.time() if now is None else now)
    return asked if math.isfinite(asked) and asked > 0 else None


def _attempt(send: Callable[[], httpx.Response]) -> httpx.Response:
    """One attempt: the answer, `_Retryable` for a failure sent again, `SendFailed` for one that is not."""
    try:
        resp = send()
    except RETRY_ERRORS as exc:
        raise _Retryable(f"{type(exc).__name__}: {exc}") from exc
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:  # waiting never fixes a URL
        raise SendFailed("config", f"the URL cannot be requested ({type(exc).__name__}: {exc}); it needs "
                                   "http:// or https:// and a host") from exc
    except httpx.TimeoutException as exc:
        raise SendFailed("timeout", f"no answer in time ({type(exc).__name__}: {exc}); not retried, since the "
                                    "service would compute the request again") from exc
    except httpx.LocalProtocolError as exc:  # refused by the client's own HTTP layer before anything left
        raise SendFailed("transport", f"{type(exc).__name__}: {exc}; the request was not sent (the client could "
                                      "not form it, so a retry fails the same way)") from exc
    except httpx.TransportError as exc:  # sent, the answer lost: the service may have done the work
        raise SendFailed("transport", f"{type(exc).__name__}: {exc}; not retried: the request was sent, so the "
                                      "service may have computed it") from exc
    except httpx.DecodingError as exc:  # answered, the body unreadable: not a TransportError (module docstring)
        raise SendFailed("transport", f"{type(exc).__name__}: the answer's body could not be decoded ({exc}); not "
                                      "retried: the service answered, so it computed the request") from exc
    if resp.status_code in RETRY_STATUS:
        raise _Retryable(f"HTTP {resp.status_code}: {resp.text[:300]}", retry_after_s(resp.headers.get("retry-after")),
                         resp)
    return resp


def send_with_retries(send: Callable[[], httpx.Response], *, retries: int, backoff_s: float,
                      max_wait_s: float = 10.0, sleep: Callable[[float], None] = time.sleep) -> httpx.Response:
    """``send()`` tried up to ``retries`` times while it fails in a retried way (module docstring), waiting
    between attempts what a busy answer's ``Retry-After`` asks, else ``backoff_s`` doubling, at most
    ``max_wait_s`` either way; any other answer is returned as it is. Raises RetriesExhausted after the last
    attempt, SendFailed at once for a failure that is not retried. ``sleep``: how the waits are spent."""
    backoff = wait_exponential(multiplier=backoff_s, max=max_wait_s)

    def wait(state: RetryCallState) -> float:
        failed = state.outcome.exception() if state.outcome is not None else None
        asked = failed.wait_s if isinstance(failed, _Retryable) else None
        return min(asked, max_wait_s) if asked is not None else backoff(state)

    try:
        return Retrying(stop=stop_after_attempt(retries), reraise=True, wait=wait, sleep=sleep,
                        retry=retry_if_exception_type(_Retryable))(_attempt, send)
    except _Retryable as exc:
        raise RetriesExhausted(f"{exc} (after {retries} attempts)", exc.response, retries) from exc
