"""The agent never blocks its event loop on file, SQLite or socket I/O.

Every run of a process shares one event loop (`ascore_videos`, `raa score-batch`, `raa serve-reward`,
`langgraph dev`), so a blocking call there stalls all runs in flight, and `langgraph dev` rejects such
calls outright (blockbuster). These tests run whole agents under blockbuster with every rule on except
lock acquisition (the caches' short in-memory locks are by design): an on-disk stage cache, the
default SQLite trace saver with a checkpoint per step, LK tracks and the tool loop, with the scripted
model and with the real ChatOpenAI transport (a retried 503 included). Before the stage
cache and the trace saver moved their SQLite work to worker threads, the first model call of a run
failed with "Blocking call to sqlite3.Connection.execute".
"""

from __future__ import annotations

import asyncio

import pytest
from blockbuster import BlockBuster
from graph_scripts import FakeSurprise, full_script, moving_square

from graph import AgentConfig, AgentTools, build_reward_agent
from graph.backbone import Backbone
from graph.builder import default_checkpointer
from graph.cache import StageCache
from graph.testing import ScriptedChatModel
from tools.motion import LKTracker

ALLOWED = ("threading.Lock.acquire", "threading.Lock.acquire_lock")


def _agent(tmp_path, preset: str, **cfg):
    backbone = Backbone(ScriptedChatModel(full_script()), cache=StageCache(tmp_path / "stage_cache.sqlite"),
                        retry_wait=(0.0, 0.0))
    return build_reward_agent(AgentConfig(preset=preset, **cfg), backbone=backbone,
                              tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()),
                              checkpointer=default_checkpointer(tmp_path / "traces.sqlite"))


async def _run(agent, clip, run_id: str, *, watch: bool):
    buster = BlockBuster()
    for name in ALLOWED:
        buster.functions.pop(name)
    if watch:
        buster.activate()
    try:
        return await agent.ainvoke({"video": str(clip), "instruction": "push the red block to the right"},
                                   {"configurable": {"thread_id": run_id}}, durability="async")
    finally:
        if watch:
            buster.deactivate()


@pytest.mark.parametrize(("preset", "cfg"), [("full", {}), ("full", {"inspect_mode": "plan"}), ("direct", {}),
                                             ("motion", {})])
def test_a_run_makes_no_blocking_call_on_the_event_loop(tmp_path, preset, cfg):
    clips = [moving_square(tmp_path / f"c{i}.mp4", seed=i) for i in range(2)]
    # first run unwatched: lazy imports read module files once per process
    asyncio.run(_run(_agent(tmp_path, preset, **cfg), clips[0], "warm", watch=False))
    agent = _agent(tmp_path, preset, **cfg)
    out = asyncio.run(_run(agent, clips[1], "watched", watch=True))
    result = out["result"]
    assert result.status == "scored", result.reasons
    assert not any("Blocking call" in r for r in result.reasons)
    history = list(agent.get_state_history({"configurable": {"thread_id": "watched"}}))
    assert len(history) > 3  # a checkpoint per step went through the saver's worker thread


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
def test_the_chatopenai_path_makes_no_blocking_call_on_the_event_loop(tmp_path, method):
    """The real transport (ChatOpenAI over httpx against a local OpenAI-compatible stub, retries with
    tenacity), not only the scripted model, under the same watch; a 503 on the first request is retried."""
    from langchain_openai import ChatOpenAI

    from tests.openai_stub import OpenAIStub, StubReply, script_responder

    responder = script_responder(full_script())
    state = {"armed": False, "failed": 0}

    def flaky(body):  # once armed, the next request gets a 503 (retried by the backbone)
        if state["armed"] and not state["failed"]:
            state["failed"] += 1
            return StubReply(status=503, content="busy")
        return responder(body)

    clips = [moving_square(tmp_path / f"c{i}.mp4", seed=i) for i in range(2)]
    with OpenAIStub(responder=flaky) as stub:
        def agent():
            chat = ChatOpenAI(base_url=stub.base_url, model="stub-model", api_key="EMPTY", timeout=10,
                              max_retries=0, temperature=0.0)
            backbone = Backbone(chat, method=method, model_name="stub-model", retry_wait=(0.0, 0.01),
                                cache=StageCache(tmp_path / f"cache-{method}.sqlite"))
            return build_reward_agent(AgentConfig(preset="full"), backbone=backbone,
                                      tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()),
                                      checkpointer=default_checkpointer(tmp_path / "traces.sqlite"))

        asyncio.run(_run(agent(), clips[0], f"warm-{method}", watch=False))
        state["armed"] = True
        out = asyncio.run(_run(agent(), clips[1], f"watched-{method}", watch=True))
    assert state["failed"] == 1 and out["result"].status == "scored", out["result"].reasons


def test_a_run_forked_after_its_quality_step_in_a_fresh_agent_makes_no_blocking_call(tmp_path):
    """Time travel in `langgraph dev`: a fresh process forks a traced run after quality, so no request
    has stat'ed the clip; the frame cache's track keys (built on the loop) must not stat it there."""
    clip = moving_square(tmp_path / "c.mp4", seed=3)
    asyncio.run(_run(_agent(tmp_path, "full"), clip, "traced", watch=False))
    fresh = _agent(tmp_path, "full")  # another frame cache: nothing known about the clip
    config = {"configurable": {"thread_id": "traced"}}
    before = next(s for s in fresh.get_state_history(config) if s.next and s.next[0] == "assess")

    async def fork():
        buster = BlockBuster()
        for name in ALLOWED:
            buster.functions.pop(name)
        buster.activate()
        try:
            return await fresh.ainvoke(None, before.config, durability="async")
        finally:
            buster.deactivate()

    out = asyncio.run(fork())
    assert out["result"].status == "scored", out["result"].reasons
    assert [s["node"] for s in out["steps"]].count("quality") == 1  # the fork did not run quality again
