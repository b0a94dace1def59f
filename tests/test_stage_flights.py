"""Concurrent identical stage inputs share one flight (graph/flights.py): the callers that wait for a holder
take its outcome, its fault included, instead of each asking the failing server again; a cancelled holder
hands the flight to one waiter; a fault is never cached for callers that come after the flight."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from pydantic import BaseModel

from graph.backbone import Backbone, BackboneFault, Usage
from graph.cache import StageCache
from graph.flights import Flights
from graph.testing import ScriptedChatModel

MSGS = [SystemMessage(content="# stage: judge\nJudge."), HumanMessage(content="ok?")]
GOOD = {"label": "a", "score": 2}


class Verdict(BaseModel):
    label: str
    score: int


def _bb(replies: list, **kw) -> tuple[Backbone, ScriptedChatModel]:
    # delay_s only makes the holder's call suspend, so the other callers reach the flight while it is in the air
    model = ScriptedChatModel({"judge": replies}, delay_s=0.01)
    opts = {"max_retries": 1, "schema_retries": 1, "timeout_s": 5.0, "retry_wait": (0.0, 0.0), **kw}
    return Backbone(model, cache=StageCache(None), **opts), model


async def _many(bb: Backbone, n: int, *, tools: bool = False) -> tuple[list, list[Usage]]:
    usages = [Usage() for _ in range(n)]
    calls = [bb.atool_round("judge", list(MSGS), [], u) if tools else bb.astructured("judge", Verdict, list(MSGS), u)
             for u in usages]
    return await asyncio.gather(*calls, return_exceptions=True), usages


@pytest.mark.parametrize("reply,kind,per_caller", [(RuntimeError("server exploded"), "transport", 1),
                                                   (TimeoutError("slow"), "timeout", 2),
                                                   ("this is { not json", "invalid_reply", 2)])
def test_waiters_take_the_holders_fault_instead_of_asking_again(reply, kind, per_caller) -> None:
    """Four identical concurrent calls against a failing server: one holder's attempts (its retries or
    re-asks), where each of the three waiters used to repeat the holder's whole schedule, one after the
    other, so a dead server cost 4x the calls and 4x the time."""
    bb, model = _bb([reply])
    outs, usages = asyncio.run(_many(bb, 4))
    assert all(isinstance(o, BackboneFault) and o.kind == kind and o.stage == "judge" for o in outs), outs
    assert len(model.calls) == per_caller
    assert sum(1 for o in outs if "concurrent identical call" in o.message) == 3  # the waiters say whose fault
    assert len({id(o) for o in outs}) == 4  # each caller raises its own exception object
    assert sum(u.calls for u in usages) == (per_caller if kind == "invalid_reply" else 0)
    assert len(bb.cache) == 0  # a fault is never stored


def test_tool_round_waiters_take_the_holders_fault() -> None:
    bb, model = _bb([RuntimeError("server exploded")])
    outs, _ = asyncio.run(_many(bb, 3, tools=True))
    assert all(isinstance(o, BackboneFault) and o.kind == "transport" for o in outs) and len(model.calls) == 1


def test_a_fault_is_not_cached_for_a_later_caller() -> None:
    bb, model = _bb([RuntimeError("down"), GOOD])
    outs, _ = asyncio.run(_many(bb, 3))
    assert all(isinstance(o, BackboneFault) for o in outs) and len(model.calls) == 1
    usage = Usage()
    assert asyncio.run(bb.astructured("judge", Verdict, list(MSGS), usage)).score == 2  # the flight ended: ask again
    assert len(model.calls) == 2 and usage.calls == 1


def test_waiters_share_a_success_as_cache_hits() -> None:
    bb, model = _bb([GOOD])
    outs, usages = asyncio.run(_many(bb, 4))
    assert [o.score for o in outs] == [2, 2, 2, 2] and len(model.calls) == 1
    assert sum(u.calls for u in usages) == 1 and sum(u.cache_hits for u in usages) == 3


def test_a_cancelled_holder_hands_the_flight_to_one_waiter() -> None:
    """A holder whose run is cancelled has no outcome to share: one waiter asks the model, the others take
    its answer."""
    bb, model = _bb([GOOD])

    async def scenario() -> tuple[list, bool]:
        holder = asyncio.ensure_future(bb.astructured("judge", Verdict, list(MSGS), Usage()))
        await asyncio.sleep(0)  # the holder is in its model call
        waiters = [asyncio.ensure_future(bb.astructured("judge", Verdict, list(MSGS), Usage())) for _ in range(3)]
        await asyncio.sleep(0)  # the waiters wait for the holder's flight
        holder.cancel()
        outs = await asyncio.gather(*waiters)
        return outs, holder.cancelled()

    outs, cancelled = asyncio.run(scenario())
    assert cancelled and [o.score for o in outs] == [2, 2, 2]
    assert len(model.calls) == 1  # one waiter's (the holder was cancelled before its reply was recorded)


def test_a_cancelled_waiter_leaves_the_flight_alone() -> None:
    flights: Flights = Flights()
    release = asyncio.Event()
    runs: list[int] = []

    async def compute() -> int:
        runs.append(1)
        await release.wait()
        return 7

    async def scenario() -> list:
        holder = asyncio.ensure_future(flights.run("k", compute))
        await asyncio.sleep(0)
        waiter = asyncio.ensure_future(flights.run("k", compute))
        other = asyncio.ensure_future(flights.run("k", compute))
        await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.sleep(0)
        release.set()
        return [await holder, await other, waiter.cancelled(), len(flights)]

    assert asyncio.run(scenario()) == [(7, False), (7, True), True, 0] and runs == [1]


def test_flights_on_different_event_loops_do_not_meet() -> None:
    flights: Flights = Flights()

    async def compute() -> AIMessage:
        return AIMessage(content="x")

    assert asyncio.run(flights.run("k", compute))[1] is False
    assert asyncio.run(flights.run("k", compute))[1] is False and len(flights) == 0
