"""graph/backbone.py `Backbone.invoke`: the first try of a model call runs outside tenacity, which takes over only
after it failed, deciding retries, waits and the stop exactly as if it had made that try itself."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableLambda
from pydantic import BaseModel

import graph.backbone as backbone_module
from graph.backbone import Backbone, BackboneFault, Usage
from graph.testing import ScriptedChatModel

MSGS = [SystemMessage(content="# stage: judge\nJudge."), HumanMessage(content="ok?")]


class Verdict(BaseModel):
    label: str
    score: int


def _counted_retrying(monkeypatch) -> list[int]:
    built: list[int] = []
    real = backbone_module.AsyncRetrying

    def counted(*args, **kwargs):
        built.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(backbone_module, "AsyncRetrying", counted)
    return built


def _recorded_sleeps(monkeypatch) -> list[float]:
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float, *args, **kwargs):
        waits.append(seconds)
        return await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    return waits


def test_a_call_answered_at_once_builds_no_retry_machinery(monkeypatch) -> None:
    """Most calls succeed at once: tenacity's retry object (and its per-attempt bookkeeping, ~0.1 ms of event-loop
    CPU a call) was built and iterated for each of them."""
    built = _counted_retrying(monkeypatch)
    model = ScriptedChatModel({"judge": [{"label": "a", "score": 1}]})
    usage = Usage()
    out = asyncio.run(Backbone(model, retry_wait=(0.0, 0.0)).astructured("judge", Verdict, list(MSGS), usage))
    assert out.score == 1 and built == [] and usage.attempts == 1 and len(model.calls) == 1


def test_the_waits_after_failed_tries_count_the_first_try(monkeypatch) -> None:
    """The backoff after try n is initial * 2**(n-1) plus a jitter below initial: the first try's failure (made
    outside tenacity) is attempt 1 of tenacity's count, so the waits are [1, 2), [2, 3), [4, 5)."""
    built = _counted_retrying(monkeypatch)
    waits = _recorded_sleeps(monkeypatch)
    model = ScriptedChatModel({"judge": [ConnectionError("reset")] * 3 + [{"label": "a", "score": 2}]})
    usage = Usage()
    bb = Backbone(model, max_retries=3, retry_wait=(1.0, 100.0))
    assert asyncio.run(bb.astructured("judge", Verdict, list(MSGS), usage)).score == 2
    assert len(waits) == 3 and 1.0 <= waits[0] <= 2.0 and 2.0 <= waits[1] <= 3.0 and 4.0 <= waits[2] <= 5.0
    assert len(model.calls) == 4 and usage.attempts == 4 and built == [1]


def test_the_first_try_counts_against_the_retries(monkeypatch) -> None:
    """max_retries=2: three tries in all, the first one included, then the fault says so."""
    waits = _recorded_sleeps(monkeypatch)
    model = ScriptedChatModel({"judge": [ConnectionError("reset")] * 5})
    usage = Usage()
    with pytest.raises(BackboneFault) as info:
        asyncio.run(Backbone(model, max_retries=2, retry_wait=(0.0, 0.0)).astructured("judge", Verdict, list(MSGS),
                                                                                      usage))
    assert info.value.kind == "transport" and "after 3 attempts" in info.value.message
    assert len(model.calls) == 3 and usage.attempts == 3 and len(waits) == 2


@pytest.mark.parametrize("max_retries", [0, 3])
def test_a_first_failure_not_retried_is_reported_after_one_attempt(monkeypatch, max_retries: int) -> None:
    """No retries allowed, or an error not worth retrying (a RuntimeError): one try, no
    wait, the error's fault."""
    waits = _recorded_sleeps(monkeypatch)
    error = ConnectionError("reset") if max_retries == 0 else RuntimeError("boom")
    model = ScriptedChatModel({"judge": [error] * 2})
    with pytest.raises(BackboneFault) as info:
        asyncio.run(Backbone(model, max_retries=max_retries, retry_wait=(0.0, 0.0))
                    .astructured("judge", Verdict, list(MSGS), Usage()))
    assert len(model.calls) == 1 and waits == []
    assert ("after 1 attempt:" in info.value.message) if max_retries == 0 else ("RuntimeError" in info.value.message)



@pytest.mark.parametrize("error", [asyncio.CancelledError("stop"), KeyboardInterrupt("stop")],
                         ids=["cancelled", "interrupted"])
def test_a_first_try_cancelled_or_interrupted_is_raised_as_it_is(monkeypatch, error: BaseException) -> None:
    """The first try's BaseException is caught and replayed through tenacity, as tenacity caught it before: it is
    raised itself (no BackboneFault, no chained context), never retried nor waited on, and no attempt counted."""
    waits = _recorded_sleeps(monkeypatch)
    calls: list[int] = []

    async def reply(_messages):
        calls.append(1)
        if len(calls) == 1:
            raise error
        return AIMessage(content="ok")

    usage = Usage()
    with pytest.raises(type(error)) as info:
        asyncio.run(Backbone(ScriptedChatModel({}), max_retries=3, retry_wait=(1.0, 1.0))
                    .invoke("judge", RunnableLambda(reply), list(MSGS), usage))
    assert info.value is error and error.__context__ is None and error.__cause__ is None
    assert calls == [1] and usage.attempts == 0 and waits == []
