"""`tools.service_budget.BodyBudget` in line: a body that does not fit waits (FIFO) for room up to
`busy_wait_s` instead of an immediate 503 the clients' few seconds of retries could not outlast."""

from __future__ import annotations

import asyncio

import pytest

from tools.service_budget import BodyBudget, body_chunks, watch_disconnect
from tools.service_frames import HTTPProblem


async def _settle() -> None:
    for _ in range(5):  # let the waiting tasks run up to their wait
        await asyncio.sleep(0)


def test_waiters_get_room_in_arrival_order_when_it_is_released():
    async def main() -> list[str]:
        budget, order = BodyBudget(10, wait_s=3600), []

        async def wait(name: str, n: int) -> None:
            with budget.reserve() as room:
                await room.wait_take(n)
                order.append(name)
                await asyncio.Event().wait()  # held until cancelled

        with budget.reserve() as first:
            await first.wait_take(8)
            big = asyncio.ensure_future(wait("big", 5))
            await _settle()
            small = asyncio.ensure_future(wait("small", 2))  # 8 + 2 fits, but it came after "big"
            await _settle()
            assert budget.waiting == 2 and order == [] and budget.held == 8
        await _settle()
        assert order == ["big", "small"] and budget.held == 7 and budget.waiting == 0
        for task in (big, small):
            task.cancel()
        await asyncio.gather(big, small, return_exceptions=True)
        assert budget.held == 0
        return order

    asyncio.run(main())


def test_a_waiter_that_gives_up_leaves_its_place_to_the_next():
    async def main() -> None:
        budget = BodyBudget(10, wait_s=3600)
        gone = asyncio.Event()

        async def client_gone() -> bool:
            await gone.wait()
            return True

        async def wait(n: int, watch=None) -> str:
            with budget.reserve() as room:
                try:
                    await room.wait_take(n, watch)
                except HTTPProblem as exc:
                    return str(exc.status)
                return "granted"

        with budget.reserve() as first:
            await first.wait_take(6)
            left = asyncio.ensure_future(wait(8, client_gone()))
            cancelled = asyncio.ensure_future(wait(8))
            await _settle()
            after = asyncio.ensure_future(wait(4))  # fits now, but waits behind the two
            await _settle()
            assert budget.waiting == 3
            gone.set()  # the first waiter's client disconnects: 499, out of line
            cancelled.cancel()  # the second's handler is cancelled
            done, _ = await asyncio.wait({left, after}, timeout=20)  # the bound only ends a hang
            assert left in done and left.result() == "499"
            assert after in done and after.result() == "granted"  # the next in line fits: not waiting for the 6
        await asyncio.gather(cancelled, return_exceptions=True)
        assert budget.waiting == 0 and budget.held == 0

    asyncio.run(main())


def test_the_wait_ends_in_a_503_naming_the_limit_and_the_wait():
    async def main() -> None:
        budget = BodyBudget(10, wait_s=0.01)
        with budget.reserve() as first:
            await first.wait_take(8)
            with budget.reserve() as room, pytest.raises(HTTPProblem) as info:
                await room.wait_take(5)
        assert info.value.status == 503 and "max_buffered_mb" in info.value.detail
        assert "busy_wait_s" in info.value.detail
        assert budget.held == 0 and budget.waiting == 0

    asyncio.run(main())


@pytest.mark.parametrize("wait_s", [-1.0, float("nan"), float("inf")])
def test_a_negative_nan_or_infinite_wait_is_refused(wait_s):
    """An infinite wait was taken: a request that found no room never got its 503 (the wait that never ends
    the NaN check was there to refuse), and its client's timeout ended it as a transport fault instead."""
    with pytest.raises(ValueError, match="busy_wait_s"):
        BodyBudget(10, wait_s=wait_s)


def test_the_disconnect_watch_keeps_what_it_read_for_the_body():
    async def main() -> None:
        messages = [{"type": "http.request", "body": b"ab", "more_body": True},
                    {"type": "http.request", "body": b"cd", "more_body": False}]

        async def receive() -> dict:
            return messages.pop(0) if messages else {"type": "http.disconnect"}

        early: list[dict] = []
        assert await watch_disconnect(receive, early) is False  # the body ended: nothing more to tell

        async def never():
            raise AssertionError("the body ended in the messages already read")
            yield b""

        assert b"".join([c async for c in body_chunks(early, never())]) == b"abcd"
        assert await watch_disconnect(receive, []) is True

    asyncio.run(main())
