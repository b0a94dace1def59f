"""Cancelling `ascore_videos` (asyncio.CancelledError) releases the workers: the background jobs its runs
queued (surprise scoring, extra tools, the speculative grid track) that no other run wants are cancelled,
not run for nobody."""

from __future__ import annotations

import asyncio
import threading
import time

from graph_scripts import FakeSurprise, full_script, moving_square


class BlockingSurprise(FakeSurprise):
    """A scorer whose calls wait for `release` (so jobs stay running, and later ones stay queued)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.entered = 0

    def score(self, frames):
        with self.lock:
            self.entered += 1
        self.release.wait(30)
        return super().score(frames)


def _wait_until(check, timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.02)
    return check()


def _blocked_batch(tmp_path, model, retries: int):
    """(clips, scorer, store, agent): 2 x LATER_SLOTS clips for a wmreward agent answered by ``model`` (with
    ``retries`` schema and transport retries) whose surprise scorer blocks until released. Remote tools: the
    scoring runs in the "io" lane (8 threads, LATER_SLOTS of them for "later" jobs)."""
    from graph import AgentConfig, build_reward_agent
    from graph.backbone import Backbone
    from graph.context import ToolProvider
    from graph.frame_store import FrameStore
    from graph.workers import LATER_SLOTS

    clips = [moving_square(tmp_path / f"c{i}.mp4", seed=i) for i in range(2 * LATER_SLOTS)]
    scorer = BlockingSurprise()
    backbone = Backbone(model, schema_retries=retries, max_retries=retries, timeout_s=60, retry_wait=(0.0, 0.0))
    tools = ToolProvider(surprise_factory=lambda: scorer, surprise_lane="io")
    store = FrameStore()
    agent = build_reward_agent(AgentConfig(preset="wmreward"), backbone=backbone, tools=tools, checkpointer=False,
                               frame_store=store)
    return clips, scorer, store, agent


def _only_the_running_scorings_ran(scorer: BlockingSurprise) -> None:
    """Once the io lane is idle: the scorings that were running finished (threads cannot be interrupted); the
    queued ones never started."""
    from graph.workers import LATER_SLOTS, pool

    io = pool("io")
    assert _wait_until(lambda: not io._heap and io._later_running == 0)
    time.sleep(0.2)
    assert scorer.entered == LATER_SLOTS


def test_cancelled_batch_cancels_its_queued_background_jobs(tmp_path):
    from graph.api import ascore_videos
    from graph.testing import ScriptedChatModel
    from graph.workers import LATER_SLOTS

    model = ScriptedChatModel(full_script(), delay_s=30.0)  # every run waits in observe / contract
    clips, scorer, store, agent = _blocked_batch(tmp_path, model, retries=1)

    async def main() -> None:
        task = asyncio.ensure_future(ascore_videos([(str(c), "push the red block") for c in clips], agent=agent))
        def started() -> int:  # every run past its quality step has queued its clip's scoring
            return sum(1 for key, _ in store._jobs.snapshot() if key[0] == "surprise")

        seen = await asyncio.to_thread(_wait_until, lambda: started() == len(clips) and scorer.entered == LATER_SLOTS)
        assert seen, (started(), scorer.entered)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass

    try:
        asyncio.run(main())
    finally:
        scorer.release.set()
    _only_the_running_scorings_ran(scorer)


def test_an_empty_batch_scores_nothing_and_builds_nothing(tmp_path, monkeypatch):
    """An empty group (a GRPO step whose rollouts all failed to write) is [], not the missing-endpoint error of
    building an agent it never runs, nor a trace database created in the working folder."""
    from graph.api import ascore_videos

    monkeypatch.chdir(tmp_path)
    assert asyncio.run(ascore_videos([])) == []
    assert asyncio.run(ascore_videos(iter(()), max_concurrency=2)) == []
    assert list(tmp_path.iterdir()) == []


def test_abandon_cancels_only_queued_jobs_no_other_run_wants():
    from concurrent.futures import Future

    from graph.job_owners import abandon, want
    from graph.workers import run_scope

    shared, own, pinned, requeued, running = Future(), Future(), Future(), Future(), Future()
    running.set_running_or_notify_cancel()
    with run_scope("run-a"):
        want(shared), want(own), want(pinned), want(running)
    with run_scope("run-b"):
        want(shared)
        want(requeued, like=shared)  # the same work queued again (FrameStore: "later" moved to "now")
    want(pinned)  # outside any run: a direct FrameStore caller
    assert abandon("run-a") == 1 and own.cancelled()
    assert not any(f.cancelled() for f in (shared, requeued, pinned, running))
    assert abandon("run-b") == 2 and shared.cancelled() and requeued.cancelled()
    assert abandon("run-b") == 0 and abandon("") == 0


def test_failed_runs_cancel_their_queued_background_jobs(tmp_path):
    """A run that ends early (here its observe call fails: ineligible) never awaits the scoring its quality step
    queued at "later"; ended, it left that job queued, and it ran for nobody ahead of the live runs' work."""
    from graph.api import ascore_videos
    from graph.testing import ScriptedChatModel
    from graph.workers import LATER_SLOTS

    model = ScriptedChatModel(full_script(observe=[RuntimeError("server down")]))
    clips, scorer, _store, agent = _blocked_batch(tmp_path, model, retries=0)
    try:
        results = asyncio.run(ascore_videos([(str(c), "push the red block") for c in clips], agent=agent))
        assert all(r.status == "ineligible" for r in results), [r.reasons for r in results]
        assert _wait_until(lambda: scorer.entered == LATER_SLOTS)
    finally:
        scorer.release.set()
    _only_the_running_scorings_ran(scorer)
