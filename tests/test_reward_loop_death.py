"""The reward runner's event loop (graph/bridge.py ``sync_loop``) dying or being hit by a SystemExit it did
not start: a wait on a reward call never hangs (training/reward_runner.py)."""

from __future__ import annotations

import asyncio
import gc
import threading

import numpy as np
import pytest

from graph.bridge import run_sync, sync_loop
from training.reward_runner import RewardRunner

CLIPS = [np.full((2, 4, 4, 3), v, dtype=np.uint8) for v in (0, 255)]


@pytest.fixture(autouse=True)
def _collect_within_the_test():
    """Finalize what a test left (the tasks of a dead loop) inside it: collected later, inside pytest's import
    of a module it rewrites, their finalizers broke CPython 3.11's AST building ("AST constructor recursion
    depth mismatch", a SystemError that failed the session)."""
    yield
    gc.collect()


async def _exits() -> None:
    raise SystemExit(3)


def test_a_systemexit_in_a_task_the_reward_starts_leaves_the_loop_running():
    """asyncio lets a task's SystemExit out of ``run_forever``: a task the reward created itself (not awaited
    through the runner's guard) ended the loop's thread, and this call and every later one hung."""
    started: list[asyncio.Task[None]] = []

    async def reward(videos, prompts, **meta):
        started.append(asyncio.get_running_loop().create_task(_exits()))  # not awaited
        await asyncio.sleep(0.05)
        return [0.5] * len(videos)

    async def awaits_it(videos, prompts, **meta):
        await asyncio.get_running_loop().create_task(_exits())
        return [0.5] * len(videos)

    with RewardRunner(reward, "r") as runner:
        assert runner.submit(CLIPS, ["a", "b"]).result(timeout=10).rewards == [0.5, 0.5]
        assert runner.submit(CLIPS, ["a", "b"]).result(timeout=10).rewards == [0.5, 0.5]
    assert [type(t.exception()) for t in started] == [SystemExit, SystemExit]
    with RewardRunner(awaits_it, "r") as runner:  # awaited: the reward raised it, its batch is ineligible
        outcome = runner.submit(CLIPS, ["a", "b"]).result(timeout=10)
        assert outcome.rewards == [None, None] and "SystemExit" in outcome.reasons[0]


def _break_the_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Make the loop's next iteration raise out of ``run_forever`` (a broken selector), ending its thread."""
    def select(timeout=None):
        raise OSError(9, "Bad file descriptor")
    loop._selector.select = select  # type: ignore[attr-defined]  # fault injection


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the loop is broken on purpose
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # its call, left on the dead loop
def test_a_wait_on_a_dead_loop_ends_ineligible_with_the_reason_and_later_calls_go_on():
    """The runner kept the loop it started with and the trainer waited on ``Future.result()`` without a limit:
    once the loop's thread had died every reward call hung. The waits end as an ineligible batch saying why,
    clips the reward was never to see keep their own reasons, and later calls run on a fresh loop."""
    started = threading.Event()

    async def hangs_then_breaks(videos, prompts, **meta):
        started.set()
        _break_the_loop(asyncio.get_running_loop())
        await asyncio.sleep(3600)

    with RewardRunner(hangs_then_breaks, "r") as runner:
        future = runner.submit(CLIPS + CLIPS[:1], ["a", "b", "c"], unscored=[None, None, "nan"])
        assert started.wait(timeout=10)
        outcome = future.result(timeout=10)  # hung forever before
        assert outcome.rewards == [None, None, None] and outcome.kinds == ["error", "error", "nan"]
        assert "event loop" in outcome.reasons[0] and "OSError" in outcome.reasons[0], outcome.reasons
        assert "diverged" in outcome.reasons[2]
        runner.fn = lambda videos, prompts, **meta: [0.25] * len(videos)
        again = runner.submit(CLIPS, ["a", "b"]).result(timeout=10)
        assert again.rewards == [0.25, 0.25], again.reasons


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the loop is broken on purpose
def test_run_sync_on_a_loop_that_dies_raises_instead_of_waiting_forever():
    loop = sync_loop()
    seen: list[BaseException] = []

    async def breaks() -> None:
        _break_the_loop(asyncio.get_running_loop())
        await asyncio.sleep(3600)

    def call() -> None:
        try:
            run_sync(breaks())
        except BaseException as raised:  # noqa: BLE001 - what the caller got is the point
            seen.append(raised)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    caller.join(timeout=15)
    assert not caller.is_alive(), "run_sync never returned"
    assert isinstance(seen[0], RuntimeError) and "event loop" in str(seen[0]), seen
    assert sync_loop() is not loop and run_sync(asyncio.sleep(0, "again")) == "again"


def test_cancelling_what_submit_returned_still_cancels_the_call():
    running, stopped = threading.Event(), threading.Event()

    async def forever(videos, prompts, **meta):
        running.set()
        try:
            await asyncio.sleep(3600)
        finally:
            stopped.set()

    with RewardRunner(forever, "forever") as runner:
        future = runner.submit(CLIPS, ["a", "b"])
        assert running.wait(timeout=10)
        assert future.cancel()
        assert stopped.wait(timeout=10)
