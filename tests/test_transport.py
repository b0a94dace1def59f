"""graph/transport.py: which model-call failures are retried, and how long between tries."""

from __future__ import annotations

import asyncio
import email.utils
import time

import httpx2
import openai
import pytest
from langchain_core.exceptions import ModelTimeoutError
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from pydantic import BaseModel
from tenacity import RetryCallState

from graph.backbone import Backbone, BackboneFault, Usage
from graph.testing import ScriptedChatModel
from graph.transport import PacedWait, is_timeout, is_transient, retry_after_s
from tests.openai_stub import OpenAIStub, StubReply, json_reply

MSGS = [SystemMessage(content="# stage: judge\nJudge."), HumanMessage(content="ok?")]


class Verdict(BaseModel):
    label: str
    score: int


@pytest.mark.parametrize("exc", [httpx2.ReadTimeout("t"), httpx2.ConnectTimeout("t"), httpx2.PoolTimeout("t")])
def test_httpx2_timeouts_are_transient_timeouts(exc) -> None:
    """openai >= 3 sends with httpx2, whose errors are not httpx's: one that escaped the SDK unwrapped was
    neither retried nor reported as a timeout."""
    assert is_transient(exc) and is_timeout(exc)


@pytest.mark.parametrize("exc", [httpx2.ConnectError("refused"), httpx2.RemoteProtocolError("cut"),
                                 httpx2.ReadError("reset")])
def test_httpx2_transport_errors_are_transient(exc) -> None:
    assert is_transient(exc) and not is_timeout(exc)


def test_an_httpx2_timeout_is_retried_and_then_reported_as_a_timeout() -> None:
    model = ScriptedChatModel({"judge": [httpx2.ReadTimeout("slow")] * 3 + [{"label": "a", "score": 1}]})
    bb = Backbone(model, max_retries=1, retry_wait=(0.0, 0.0))
    with pytest.raises(BackboneFault) as info:
        asyncio.run(bb.astructured("judge", Verdict, list(MSGS), Usage()))
    assert info.value.kind == "timeout" and "after 2 attempts" in info.value.message
    assert len(model.calls) == 2


def _status(code: int, **headers: str) -> openai.APIStatusError:
    req = httpx2.Request("POST", "http://stub/v1/chat/completions")
    return openai.APIStatusError(f"status {code}", response=httpx2.Response(code, request=req, headers=headers),
                                 body=None)


def test_rate_limit_and_server_errors_are_judged_by_their_status_and_headers() -> None:
    """openai's RateLimitError and InternalServerError are APIStatusErrors: their status and `x-should-retry`
    decide, like any other error reply's (a 501 says the server cannot serve the request at all)."""
    req = httpx2.Request("POST", "http://stub/v1/chat/completions")

    def error(cls: type[openai.APIStatusError], code: int, **headers: str) -> openai.APIStatusError:
        return cls(f"status {code}", response=httpx2.Response(code, request=req, headers=headers), body=None)

    assert is_transient(error(openai.RateLimitError, 429)) and is_transient(error(openai.InternalServerError, 500))
    assert not is_transient(error(openai.RateLimitError, 429, **{"x-should-retry": "false"}))
    assert not is_transient(error(openai.InternalServerError, 503, **{"x-should-retry": "false"}))
    assert not is_transient(error(openai.InternalServerError, 501))


def test_409_is_retried_and_the_servers_x_should_retry_overrides_the_status() -> None:
    """As the openai SDK reads them: 409 is OpenAI's lock timeout, and a server that says whether to retry
    is obeyed."""
    assert is_transient(_status(409))
    assert not is_transient(_status(503, **{"x-should-retry": "false"}))
    assert is_transient(_status(400, **{"x-should-retry": "true"}))
    assert not is_transient(_status(400)) and is_transient(_status(503))


def test_retry_after_is_read_in_milliseconds_seconds_or_as_a_date() -> None:
    assert retry_after_s(_status(429, **{"retry-after-ms": "250", "retry-after": "9"})) == 0.25
    assert retry_after_s(_status(429, **{"retry-after": "1.5"})) == 1.5
    later = email.utils.formatdate(time.time() + 100, usegmt=True)
    assert 90 < (retry_after_s(_status(503, **{"retry-after": later})) or 0) <= 101
    assert retry_after_s(_status(429)) is None and retry_after_s(_status(429, **{"retry-after": "soon"})) is None
    assert retry_after_s(_status(429, **{"retry-after": "inf"})) is None and retry_after_s(ValueError()) is None


def _waited(wait: PacedWait, exc: BaseException, attempt: int = 1) -> float:
    state = RetryCallState(None, None, (), {})
    state.attempt_number = attempt
    state.set_exception((type(exc), exc, None))
    return wait(state)


def test_the_wait_is_the_servers_within_the_policys_max() -> None:
    wait = PacedWait(0.5, 8.0)
    assert _waited(wait, _status(429, **{"retry-after": "3"})) == 3.0
    assert _waited(wait, _status(429, **{"retry-after": "600"})) == 8.0  # bounded by the policy
    assert _waited(wait, _status(429, **{"retry-after-ms": "20"})) == 0.02
    assert 1.0 <= _waited(wait, _status(429, **{"retry-after": "0"}), attempt=2) <= 1.5  # backoff with jitter
    assert 2.0 <= _waited(wait, _status(503), attempt=3) <= 2.5 and _waited(wait, _status(503), attempt=9) == 8.0


def _chat(stub: OpenAIStub) -> ChatOpenAI:
    return ChatOpenAI(base_url=stub.base_url, model="stub-model", api_key="EMPTY", timeout=5.0, max_retries=0)


def _ok() -> StubReply:
    return json_reply({"label": "ok", "score": 3})


def test_the_real_client_path_retries_409_and_obeys_x_should_retry() -> None:
    with OpenAIStub([StubReply(status=409), StubReply(status=400, headers={"x-should-retry": "true"}), _ok(),
                     StubReply(status=503, headers={"x-should-retry": "false"}), _ok()]) as stub:
        bb = Backbone(_chat(stub), max_retries=3, retry_wait=(0.0, 0.0))
        assert bb.structured("judge", Verdict, list(MSGS), Usage()).score == 3  # one loop: the pool stays good
        assert len(stub.requests) == 3
        with pytest.raises(BackboneFault) as info:
            bb.structured("judge", Verdict, list(MSGS), Usage())
    # not retried, as told, but still the server's outage, not the model's answer (tests/test_retry_header_kinds.py)
    assert info.value.kind == "transport" and "503" in info.value.message and len(stub.requests) == 4
    assert "after 1 attempt:" in info.value.message


def test_the_real_client_path_waits_as_the_server_asks(monkeypatch) -> None:
    """The backbone's tries wait what `Retry-After` asks (bounded by retry_wait's max); it was ignored."""
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float, *args, **kwargs):
        waits.append(seconds)
        return await real_sleep(0)

    with OpenAIStub([StubReply(status=429, headers={"retry-after": "2"}),
                     StubReply(status=503, headers={"retry-after": "3600"}), _ok()]) as stub:
        bb = Backbone(_chat(stub), max_retries=2, retry_wait=(0.0, 5.0))
        monkeypatch.setattr(asyncio, "sleep", sleep)
        assert asyncio.run(bb.astructured("judge", Verdict, list(MSGS), Usage())).score == 3
    assert waits == [2.0, 5.0] and len(stub.requests) == 3


class _ProviderTimeout(ModelTimeoutError):
    """A timeout as another LangChain integration raises it: LangChain's own class, no openai or httpx base."""


def test_a_langchain_model_timeout_from_any_provider_is_reported_as_a_timeout() -> None:
    """The backbone wraps any LangChain chat model, and LangChain marks a provider's timeout with
    `ModelTimeoutError` (retryable): it was retried, but once the retries were spent it was reported as kind
    "transport", where the same timeout through langchain-openai (an openai.APITimeoutError too) was "timeout"."""
    assert is_transient(_ProviderTimeout("slow")) and is_timeout(_ProviderTimeout("slow"))
    model = ScriptedChatModel({"judge": [_ProviderTimeout("slow")] * 3 + [{"label": "a", "score": 1}]})
    bb = Backbone(model, max_retries=1, retry_wait=(0.0, 0.0))
    with pytest.raises(BackboneFault) as info:
        asyncio.run(bb.astructured("judge", Verdict, list(MSGS), Usage()))
    assert info.value.kind == "timeout" and "after 2 attempts" in info.value.message
    assert len(model.calls) == 2


def test_the_backoff_uses_no_deprecated_tenacity_parameter() -> None:
    """tenacity 9 deprecates wait_exponential_jitter(initial=...) (renamed multiplier, which 8.x lacks): PacedWait
    warned on every backbone built, and would break when tenacity drops the name."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        wait = PacedWait(0.5, 8.0)
        assert 0.5 <= _waited(wait, _status(503), attempt=1) <= 1.0
    assert _waited(PacedWait(0.0, 0.01), _status(503), attempt=5) == 0.0
