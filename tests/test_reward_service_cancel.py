"""graph/reward_service.py: the runs of a request nobody waits for any more are cancelled (split from
test_reward_service.py)."""

from __future__ import annotations

import asyncio
import base64

import pytest
from graph_scripts import full_script, moving_square
from langgraph.checkpoint.memory import InMemorySaver
from service_helpers import serve

from graph.reward_service import create_reward_app


def _b64(path) -> str:
    return base64.b64encode(path.read_bytes()).decode("ascii")


def test_a_client_that_disconnects_has_its_runs_cancelled(tmp_path, monkeypatch):
    """The runs of a request whose client gave up (its timeout) went on to the end, holding the shared slots;
    a trainer retrying on timeout multiplied them (4 clips, 3 attempts: 12 runs)."""
    import time

    import httpx

    from graph import AgentConfig, AgentTools, build_reward_agent, reward_service
    from graph.testing import ScriptedChatModel

    monkeypatch.setattr(reward_service, "DISCONNECT_POLL_S", 0.1)
    model = ScriptedChatModel(full_script(), delay_s=0.3)
    agent = build_reward_agent(AgentConfig(preset="decomposed"), model=model, tools=AgentTools(),
                               checkpointer=InMemorySaver())
    clips = [moving_square(tmp_path / f"c{i}.mp4", seed=i) for i in range(4)]
    body = {"items": [{"video_b64": _b64(c), "instruction": "push the red block to the right"} for c in clips]}
    with serve(create_reward_app(agent, "decomposed", max_concurrency=1)) as url:
        with pytest.raises(httpx.TimeoutException):
            httpx.post(f"{url}/v1/score", json=body, timeout=0.5)
        seen, quiet = -1, 0.0
        while quiet < 2.0:  # until the model has had no call for 2 s (all 4 runs take ~5 s uncancelled)
            time.sleep(0.25)
            now = len(model.calls)
            quiet = quiet + 0.25 if now == seen else 0.0
            seen = now
    assert len(model.calls_for("assess")) < 4, [c.stage for c in model.calls]  # one assess per run (contract: cached)


def test_a_cancelled_score_request_cancels_its_runs(monkeypatch):
    """The `score` handler cancelled (server shutdown, a framework dropping the request) left its runs going on
    to the end: model calls and CPU for results nobody would read. They are cancelled before it returns."""
    import httpx

    import graph.reward_service

    started, cancelled = [], []
    all_started = asyncio.Event()

    async def fake_run(agent, video, instruction, run_id, preset, *, durability="exit", claim_max_age_s=0.0):
        started.append(run_id)
        if len(started) == 2:
            all_started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(run_id)
            raise

    monkeypatch.setattr(graph.reward_service, "arun_agent", fake_run)
    app = create_reward_app(object(), "full")
    item = {"video_b64": base64.b64encode(b"bytes").decode(), "instruction": "x"}

    async def main() -> list[str]:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)  # the app runs in the request's own task
            async with httpx.AsyncClient(transport=transport, base_url="http://service") as c:
                request = asyncio.ensure_future(c.post("/v1/score", json={"items": [item] * 2}))
                await all_started.wait()
                request.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await request
                return list(cancelled)  # before asyncio.run cancels whatever is left at its end

    assert sorted(asyncio.run(main())) == sorted(started) and len(started) == 2
