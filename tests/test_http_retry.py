"""tools.http_retry.send_with_retries: which failures are retried (the request was never delivered, or the
service said it did not take it on: 429, 503) and which are not (the request was delivered and its answer
lost: the service may have done, or still be doing, the work), and the wait a busy answer asks for."""

from __future__ import annotations

import httpx
import pytest

from tools.client import status_kind
from tools.http_retry import RetriesExhausted, SendFailed, retry_after_s, send_with_retries


def _client(answers: list) -> tuple[httpx.Client, list[int]]:
    """A client whose transport gives ``answers`` in turn (an exception is raised, a status answered); the
    list counts the requests sent."""
    sent: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        answer = answers[min(len(sent), len(answers) - 1)]
        sent.append(1)
        if isinstance(answer, Exception):
            raise answer
        status, headers = answer if isinstance(answer, tuple) else (answer, {})
        return httpx.Response(status, headers=headers, json={"detail": "x"})

    return httpx.Client(transport=httpx.MockTransport(handler), base_url="http://svc"), sent


def _send(http: httpx.Client, retries: int = 3, sleeps: list[float] | None = None, **kw) -> httpx.Response:
    return send_with_retries(lambda: http.post("/v1/track", content=b"x"), retries=retries, backoff_s=0.01,
                             sleep=(sleeps.append if sleeps is not None else lambda s: None), **kw)


@pytest.mark.parametrize("exc", [httpx.ReadError("connection reset by peer"),
                                 httpx.RemoteProtocolError("Server disconnected without sending a response")])
def test_an_answer_lost_after_the_request_was_sent_is_not_retried(exc):
    """ReadError and RemoteProtocolError come after the request went out whole: the service may be computing it,
    and each retry added one more full computation (3 attempts, 3 tracker runs or 3 scored batches)."""
    http, sent = _client([exc, 200])
    with pytest.raises(SendFailed) as info:
        _send(http)
    assert len(sent) == 1 and info.value.kind == "transport" and not isinstance(info.value, RetriesExhausted)
    assert "not retried" in str(info.value) and type(exc).__name__ in str(info.value)


@pytest.mark.parametrize("status", [502, 504])
def test_a_gateway_failure_is_not_retried(status):
    """A proxy's 502 / 504 comes after it forwarded the request: the service behind it may have done the work
    (504: it still is, as with a read timeout). It is answered once, as the status the client maps."""
    http, sent = _client([status, 200])
    assert _send(http).status_code == status and len(sent) == 1
    assert status_kind(504) == "timeout" and status_kind(502) == "transport"


@pytest.mark.parametrize("exc", [httpx.ConnectError("refused"), httpx.ConnectTimeout("slow"),
                                 httpx.PoolTimeout("no connection"), httpx.WriteError("broken pipe"),
                                 httpx.WriteTimeout("the server read none of the body in time")])
def test_a_request_never_delivered_whole_is_retried(exc):
    """Nothing was computed: the connection was never made, or the body never arrived whole (the services read
    the whole body before any work)."""
    http, sent = _client([exc, exc, 200])
    assert _send(http).status_code == 200 and len(sent) == 3


@pytest.mark.parametrize("status", [429, 503])
def test_busy_answers_are_retried_after_the_wait_they_ask_for(status):
    """429 and 503 say the request was not taken on; a Retry-After is the wait before the next attempt (at most
    ``max_wait_s``), where the client's own backoff (0.5 s doubling) gave up within seconds."""
    http, sent = _client([(status, {"Retry-After": "7"}), (status, {"Retry-After": "600"}), 200])
    sleeps: list[float] = []
    assert _send(http, sleeps=sleeps, max_wait_s=30.0).status_code == 200 and len(sent) == 3
    assert sleeps == [7.0, 30.0]


def test_a_busy_answer_without_retry_after_backs_off_and_runs_out():
    http, sent = _client([503])
    sleeps: list[float] = []
    with pytest.raises(RetriesExhausted, match="HTTP 503.*after 3 attempts"):
        _send(http, sleeps=sleeps)
    assert len(sent) == 3 and sleeps == [0.01, 0.02]


@pytest.mark.parametrize("value", ["soon", "-5", "0", "nan", ""])
def test_an_unusable_retry_after_falls_back_to_the_backoff(value):
    http, _ = _client([(503, {"Retry-After": value}), 200])
    sleeps: list[float] = []
    assert _send(http, sleeps=sleeps).status_code == 200 and sleeps == [0.01]


def test_a_request_the_client_cannot_form_is_not_said_to_be_sent():
    """httpx's LocalProtocolError (a header h11 refuses) is raised before anything leaves: nothing was computed,
    and the fault said "the request was sent, so the service may have computed it"."""
    http, sent = _client([httpx.LocalProtocolError("Illegal header value b'x '"), 200])
    with pytest.raises(SendFailed) as info:
        _send(http)
    assert len(sent) == 1 and info.value.kind == "transport" and not isinstance(info.value, RetriesExhausted)
    assert "was not sent" in str(info.value) and "was sent, so" not in str(info.value)


@pytest.mark.parametrize("zone", ["UTC-5", "UTC+8"])  # POSIX TZ: UTC-5 is 5 h east of Greenwich
def test_an_asctime_retry_after_date_is_gmt_whatever_the_local_zone(zone: str, monkeypatch) -> None:
    """RFC 9110 accepts three HTTP-date forms, all GMT; `parsedate_to_datetime` gives the asctime one
    ("Sun Nov  6 08:49:37 1994", no zone) as a naive datetime, which `.timestamp()` read as local time: off by
    the zone's offset (in the past east of Greenwich: no wait; hours ahead west of it: the max wait)."""
    import time as clock

    monkeypatch.setenv("TZ", zone)
    clock.tzset()
    try:
        now = 1_700_000_000.0
        asctime = clock.strftime("%a %b %d %H:%M:%S %Y", clock.gmtime(now + 100))
        assert retry_after_s(asctime, now) == pytest.approx(100.0)
        assert retry_after_s(clock.strftime("%a, %d %b %Y %H:%M:%S GMT", clock.gmtime(now + 100)), now) == 100.0
    finally:
        monkeypatch.undo()
        clock.tzset()
