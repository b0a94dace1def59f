"""graph/bridge.py: the sync entry points share one event loop, so a model client's pooled keep-alive
connections survive from one call to the next; and the backbone retries a connection left over from
another loop (graph/backbone.py `_STALE_LOOP`).

The stub answers with HTTP/1.1 keep-alive, as vLLM and hosted APIs do (`OpenAIStub(keep_alive=True)`);
langchain-openai then pools connections in one async client shared by every ChatOpenAI of that base URL.
With a fresh event loop per sync call, every other `score_video` was ineligible ("Event loop is closed")
and the sync `invoke`, one loop per node, lost every run after the first.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading

import numpy as np
import pytest
from graph_scripts import full_script
from langchain_openai import ChatOpenAI
from openai_stub import OpenAIStub, script_responder

from graph import AgentConfig, ascore_videos, build_reward_agent, score_video
from graph.backbone import Backbone, is_transient
from graph.bridge import run_sync, sync_loop
from graph.settings import BackboneSettings
from tests.graph_scripts import textured_frames

CONFIG = AgentConfig(preset="decomposed")
SETTINGS = BackboneSettings(max_retries=0, cache_path=None)  # no retry: a stale connection would fail the run


@pytest.fixture
def stub():
    with OpenAIStub(responder=script_responder(full_script()), keep_alive=True) as server:
        yield server


def _model(stub: OpenAIStub) -> ChatOpenAI:
    return ChatOpenAI(base_url=stub.base_url, api_key="x", model="stub", max_retries=0, timeout=30)


def test_score_video_again_and_again_on_a_keep_alive_server(stub, clip, tmp_path):
    settings = BackboneSettings(max_retries=0, cache_path=None, traces_path=str(tmp_path / "t.sqlite"))
    for _ in range(3):
        res = score_video(clip, "Push the red block to the right.", CONFIG, model=_model(stub), settings=settings)
        assert res.status == "scored", res.reasons


def test_sync_invoke_again_and_again_on_a_keep_alive_server(stub, clip, tmp_path):
    settings = BackboneSettings(max_retries=0, cache_path=None, traces_path=str(tmp_path / "t.sqlite"))
    agent = build_reward_agent(CONFIG, model=_model(stub), settings=settings)
    for i in range(3):
        out = agent.invoke({"video": str(clip), "instruction": "Push the red block to the right."},
                           {"configurable": {"thread_id": f"run-{i}"}})
        assert out["result"].status == "scored", out["result"].reasons


def test_training_rewards_and_held_out_evaluation_share_the_loop(stub, tmp_path):
    """RewardRunner (training rewards) and call_reward (held-out evaluation) alternate on one agent."""
    from training.reward_runner import RewardRunner
    from training.rewards import AgentReward, call_reward

    settings = BackboneSettings(max_retries=0, cache_path=None, traces_path=str(tmp_path / "t.sqlite"),
                                inspect_mode="plan")
    fn = AgentReward(preset="decomposed", model=_model(stub), settings=settings,
                     video_dir=str(tmp_path / "new" / "clips"))  # a folder nobody made yet: made on first use
    rng = np.random.default_rng(0)

    def clips() -> list[np.ndarray]:  # new clips each time: the agent's stage cache must not answer for the model
        return [textured_frames(rng) for _ in range(2)]

    with RewardRunner(fn, "agent") as runner:
        for it in range(2):
            held_out = call_reward(fn, "agent", clips(), ["pick the cup"] * 2, iteration=it, fps=8.0, phase="eval")
            train = runner.submit(clips(), ["pick the cup"] * 2, iteration=it, fps=8.0).result(timeout=120)
            assert None not in train.rewards + held_out.rewards, train.reasons + held_out.reasons


def test_own_event_loops_recover_by_retrying_a_stale_connection(stub, clip, tmp_path):
    """A script that runs `asyncio.run(ascore_videos(...))` batch after batch: the first model call of a new
    loop may get a connection of the old one; the backbone retries it (another connection)."""
    items = [(clip, "Push the red block to the right.")]
    for _ in range(3):
        backbone = Backbone(_model(stub), max_retries=2, retry_wait=(0.0, 0.0))
        results = asyncio.run(ascore_videos(items, CONFIG, backbone=backbone,
                                            settings=BackboneSettings(cache_path=None,
                                                                      traces_path=str(tmp_path / "t.sqlite"))))
        assert [r.status for r in results] == ["scored"], results[0].reasons


def test_stale_loop_errors_are_transient():
    assert is_transient(RuntimeError("Event loop is closed"))
    assert is_transient(RuntimeError("<asyncio.locks.Event object at 0x1> is bound to a different event loop"))
    assert not is_transient(RuntimeError("something else"))


def test_run_sync_one_loop_context_errors_and_nesting():
    var = contextvars.ContextVar("var", default="unset")

    async def where() -> tuple[asyncio.AbstractEventLoop, str]:
        return asyncio.get_running_loop(), var.get()

    var.set("caller's")
    loop1, seen = run_sync(where())
    loop2, _ = run_sync(where())
    assert loop1 is loop2 is sync_loop() and seen == "caller's"

    async def boom() -> None:
        raise KeyError("inside")

    with pytest.raises(KeyError, match="inside"):
        run_sync(boom())

    async def from_a_running_loop() -> asyncio.AbstractEventLoop:  # e.g. a Jupyter cell calling sync code
        return run_sync(where())[0]

    assert asyncio.run(from_a_running_loop()) is loop1

    async def nested() -> str:  # sync code called on the bridge loop itself must not wait for it
        return run_sync(asyncio.sleep(0, result="done"))

    assert run_sync(nested()) == "done"
    threads = []

    async def name() -> str:
        return threading.current_thread().name

    for _ in range(2):
        t = threading.Thread(target=lambda: threads.append(run_sync(name())))
        t.start()
        t.join(timeout=30)
    assert threads == ["raa-sync-loop", "raa-sync-loop"]


@pytest.mark.parametrize("exc", [SystemExit(3), KeyboardInterrupt()])
def test_a_coroutine_raising_system_exit_raises_it_in_the_caller_and_keeps_the_loop(exc):
    # asyncio lets SystemExit / KeyboardInterrupt out of the loop: the bridge thread died before the
    # caller's future was settled, and the caller waited forever (here: the helper thread never ends)
    async def leave() -> None:
        raise exc

    seen: list[BaseException] = []

    def call() -> None:
        try:
            run_sync(leave())
        except BaseException as raised:  # noqa: BLE001 - what the caller got is the point
            seen.append(raised)

    loop = sync_loop()
    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    caller.join(timeout=60)
    assert not caller.is_alive(), "run_sync never returned"
    assert seen == [exc]
    assert sync_loop() is loop  # the bridge thread is still running


def test_sync_code_two_levels_deep_on_the_bridge_loop_does_not_deadlock():
    # level 1 runs on a fresh loop in a helper thread while the bridge thread waits for it; level 2, called
    # from that helper, was sent to the waiting bridge loop and never ran
    async def inner() -> str:
        return run_sync(asyncio.sleep(0, result="deep"))

    async def outer() -> str:
        return run_sync(inner())

    seen: list[str] = []
    caller = threading.Thread(target=lambda: seen.append(run_sync(outer())), daemon=True)
    caller.start()
    caller.join(timeout=60)
    assert not caller.is_alive(), "run_sync never returned"
    assert seen == ["deep"]
    assert run_sync(asyncio.sleep(0, result="back")) == "back"  # the bridge loop serves calls again


def test_a_cancelled_error_keeps_its_message_through_run_sync():
    """A coroutine that ends cancelled with a reason (a client's own cancelled task, `task.cancel(msg)`) raised
    a bare concurrent.futures.CancelledError in the caller: the reason was gone, and a reward's ineligible
    batch said only "raised CancelledError: " (training/reward_outcome.py). It keeps its type (an Exception
    the sync callers' handlers catch) and now carries the reason."""
    async def given_up() -> None:
        raise asyncio.CancelledError("client timeout after 30 s")

    async def cancelled_by_its_owner() -> None:
        inner = asyncio.ensure_future(asyncio.sleep(3600))
        await asyncio.sleep(0)
        inner.cancel("the service shut down")
        await inner

    for coro, reason in ((given_up(), "client timeout after 30 s"), (cancelled_by_its_owner(), "the service shut down")):
        with pytest.raises(concurrent.futures.CancelledError) as info:
            run_sync(coro)
        assert info.value.args == (reason,) and isinstance(info.value.__cause__, asyncio.CancelledError)
    assert run_sync(asyncio.sleep(0, "still usable")) == "still usable"


def test_a_cancelled_coroutine_run_from_the_bridge_thread_raises_the_same_error():
    """Sync code called on the bridge loop runs its coroutine on a fresh loop (`asyncio.run`), which raised
    asyncio.CancelledError, a BaseException the sync callers' `except Exception` handlers let through, and
    not the concurrent.futures.CancelledError with the reason that the normal path raises."""
    async def given_up() -> None:
        raise asyncio.CancelledError("client timeout after 30 s")

    async def on_the_bridge() -> BaseException | None:
        try:
            run_sync(given_up())
        except BaseException as exc:  # noqa: BLE001 - what the nested caller got is the point
            return exc
        return None

    seen = run_sync(on_the_bridge())
    assert type(seen) is concurrent.futures.CancelledError and seen.args == ("client timeout after 30 s",)
    assert isinstance(seen.__cause__, asyncio.CancelledError)
