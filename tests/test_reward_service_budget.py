"""The reward service's bound on request bodies held at once (`raa serve-reward --max-buffered-mb`,
tools/service_budget.py as for the tool service): every request could hold a body of `max_body_mb` (2 GiB)
for as long as its runs took, with no bound on how many at once."""

from __future__ import annotations

import asyncio
import base64
import threading
import time

import pytest
from service_helpers import serve

from graph.reward_service import create_reward_app
from tools.service_budget import DEFAULT_REWARD_BUSY_WAIT_S


def _body_of(kib: int) -> dict:
    video = base64.b64encode(bytes(kib * 1024 * 3 // 4)).decode()  # base64: 4 characters per 3 bytes
    return {"items": [{"video_b64": video, "instruction": "x"}]}


def _held_runs(monkeypatch, hold_s: float) -> tuple[threading.Event, threading.Event]:
    """(entered, release): the service's runs set ``entered``, then wait for ``release`` (``hold_s`` at most)
    before answering a scored 0.5, so a request's body stays held meanwhile."""
    import graph.reward_service
    from graph.schemas import RewardResult

    entered, release = threading.Event(), threading.Event()

    async def fake_run(agent, video, instruction, run_id, preset, *, durability="exit", claim_max_age_s=0.0):
        entered.set()
        await asyncio.to_thread(release.wait, hold_s)
        return RewardResult(status="scored", reward=0.5, run_id=run_id, preset=preset)

    monkeypatch.setattr(graph.reward_service, "arun_agent", fake_run)
    return entered, release


def test_a_body_past_the_buffered_limit_is_503_busy_until_the_held_ones_are_answered(monkeypatch):
    import httpx

    entered, release = _held_runs(monkeypatch, 10)
    app = create_reward_app(object(), "full", max_body_mb=1.0, max_buffered_mb=1.5, busy_wait_s=0)  # 503 at once
    body = _body_of(768)  # 0.75 MiB: two do not fit in 1.5 MiB
    first: dict = {}
    with serve(app) as url:
        def post_first() -> None:
            first["r"] = httpx.post(f"{url}/v1/score", json=body, timeout=20)

        t = threading.Thread(target=post_first)
        t.start()
        assert entered.wait(10)  # the first request's run holds its body
        busy = httpx.post(f"{url}/v1/score", json=body, timeout=20)
        info = httpx.get(f"{url}/v1/info", timeout=20).json()
        release.set()
        t.join(20)
        assert busy.status_code == 503, busy.text  # the trainer's client retries it (training/rewards.py)
        assert "busy" in busy.json()["detail"] and "max_buffered_mb" in busy.json()["detail"]
        assert float(busy.headers["retry-after"]) > 0  # when to try again: the client waits it
        assert first["r"].status_code == 200 and first["r"].json()["results"][0]["reward"] == 0.5
        assert info["max_buffered_bytes"] == int(1.5 * 2**20)
        again = httpx.post(f"{url}/v1/score", json=body, timeout=20)  # released: it fits now
        assert again.status_code == 200, again.text
    assert app.state.bodies.held == 0


def test_a_body_past_the_buffered_limit_waits_for_room_by_default(monkeypatch):
    """A body that does not fit waits (by default minutes) for the held one's answer, then is scored: a 503 at
    once outlasted the trainer's few seconds of retries and became an ineligible batch."""
    import httpx

    entered, release = _held_runs(monkeypatch, 30)
    app = create_reward_app(object(), "full", max_body_mb=1.0, max_buffered_mb=1.5)
    assert app.state.bodies.wait_s == DEFAULT_REWARD_BUSY_WAIT_S
    body = _body_of(768)  # 0.75 MiB: two do not fit in 1.5 MiB
    answers: dict = {}
    with serve(app) as url:
        def post(name: str) -> None:
            answers[name] = httpx.post(f"{url}/v1/score", json=body, timeout=60)

        threads = [threading.Thread(target=post, args=(name,)) for name in ("first", "second")]
        threads[0].start()
        assert entered.wait(10)  # the first request's run holds its body
        threads[1].start()
        deadline = time.monotonic() + 20  # only ends a hang: the assertion is on the state reached
        while app.state.bodies.waiting != 1:
            assert time.monotonic() < deadline, "the second request never waited in line"
            time.sleep(0.01)
        assert "second" not in answers  # waiting, not refused
        release.set()
        for t in threads:
            t.join(30)
    assert [answers[n].status_code for n in ("first", "second")] == [200, 200], answers["second"].text
    assert answers["second"].json()["results"][0]["reward"] == 0.5
    assert app.state.bodies.held == 0 and app.state.bodies.waiting == 0


def test_the_buffered_limit_is_at_least_one_body_of_the_largest_size():
    with pytest.raises(ValueError, match=r"max_buffered_mb \(4\) must be at least max_body_mb \(8\)"):
        create_reward_app(object(), "full", max_body_mb=8.0, max_buffered_mb=4.0)
    assert create_reward_app(object(), "full").state.bodies.limit == 2048 * 2**20
    assert create_reward_app(object(), "full", max_body_mb=4096.0).state.bodies.limit == 4096 * 2**20


def test_cli_max_buffered_mb(monkeypatch, tmp_path):
    """`raa serve-reward --max-buffered-mb` reaches the app; one below --max-body-mb is refused before the
    endpoint check and the tool models."""
    import uvicorn
    from typer.testing import CliRunner

    import graph.commands
    from graph.cli import app as cli_app

    env = {"RAA_BASE_URL": "http://127.0.0.1:9/v1", "RAA_MODEL": "m", "RAA_API_KEY": "EMPTY",
           "RAA_TRACES_PATH": str(tmp_path / "traces.sqlite"), "RAA_CACHE_PATH": "off", "RAA_ENDPOINT_WAIT_S": "0"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    seen, checks = {}, []
    monkeypatch.setattr(uvicorn, "run", lambda app, host, port, log_level, **kw: seen.update(app=app))
    real_preflight = graph.commands.preflight_or_exit
    monkeypatch.setattr(graph.commands, "preflight_or_exit", lambda s: checks.append(1) or real_preflight(s))
    base = ["serve-reward", "--preset", "no_wmreward"]
    bad = CliRunner().invoke(cli_app, [*base, "--max-buffered-mb", "8", "--max-body-mb", "16"])
    assert bad.exit_code == 2 and "max_buffered_mb (8)" in bad.output and "max_body_mb (16)" in bad.output
    assert not checks and not seen
    ok = CliRunner().invoke(cli_app, [*base, "--max-buffered-mb", "512", "--max-body-mb", "64"])
    assert ok.exit_code == 0, ok.output
    assert seen["app"].state.bodies.limit == 512 * 2**20 and checks == [1]
    assert seen["app"].state.bodies.wait_s == DEFAULT_REWARD_BUSY_WAIT_S
    ok = CliRunner().invoke(cli_app, [*base, "--busy-wait-s", "0"])
    assert ok.exit_code == 0 and seen["app"].state.bodies.wait_s == 0.0, ok.output
    seen.clear()
    nan = CliRunner().invoke(cli_app, [*base, "--busy-wait-s", "nan"])
    assert nan.exit_code == 2 and "--busy-wait-s" in nan.output and checks == [1, 1] and not seen
    endless = CliRunner().invoke(cli_app, [*base, "--busy-wait-s", "inf"])  # a wait that never ends, like NaN's
    assert endless.exit_code == 2 and "--busy-wait-s" in endless.output and not seen
    ok = CliRunner().invoke(cli_app, [*base, "--body-timeout-s", "7.5"])  # the body-read deadline (408)
    assert ok.exit_code == 0 and seen["app"].state.body_timeout_s == 7.5, ok.output
    seen.clear()
    inf = CliRunner().invoke(cli_app, [*base, "--body-timeout-s", "inf"])
    assert inf.exit_code == 2 and "--body-timeout-s" in inf.output and not seen
