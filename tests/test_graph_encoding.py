"""Observe's images are encoded while the quality statistics run, once (FrameStore.start_encoding)."""

from __future__ import annotations

import asyncio
import functools
import threading

import pytest
from graph_scripts import FakeSurprise, full_script, moving_square, run, tool_call
from langchain_core.messages import HumanMessage

from graph.frame_store import FrameStore
from tools.video import VideoError

SAMPLE = list(range(0, 33, 4))


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return str(moving_square(tmp_path_factory.mktemp("clips") / "square.mp4"))


class HeldEncoding(FrameStore):
    """A FrameStore whose `start_encoding` job waits for `release` before encoding."""

    def __init__(self) -> None:
        super().__init__(long_side=64)
        self.release = threading.Event()
        self.job_started = threading.Event()

    def _encode(self, video, indices):
        self.job_started.set()
        assert self.release.wait(10)
        super()._encode(video, indices)


def test_blocks_asked_for_while_their_encoding_runs_wait_for_it_instead_of_encoding_again(clip):
    store = HeldEncoding()
    store.prefetch(clip, range(33))

    async def scenario():
        job = store.start_encoding(clip, SAMPLE)
        assert store.start_encoding(clip, SAMPLE) is job  # a running job is reused
        assert await asyncio.to_thread(store.job_started.wait, 10)
        asking = asyncio.ensure_future(store.ablocks(clip, SAMPLE))
        await asyncio.sleep(0.2)
        assert not asking.done() and store.encoded == 0  # waiting, not encoding on its own
        store.release.set()
        return await asking

    blocks = asyncio.run(scenario())
    assert store.encoded == len(SAMPLE)
    assert blocks == FrameStore(long_side=64).image_blocks(clip, SAMPLE)
    assert store.start_encoding(clip, SAMPLE) is not None and store.encoded == len(SAMPLE)  # all cached


def test_a_failed_encoding_job_leaves_the_blocks_to_the_caller(clip, tmp_path):
    class Failing(FrameStore):
        def _encode(self, video, indices):
            raise RuntimeError("encoder crashed")

    store = Failing(long_side=64)
    job = store.start_encoding(clip, SAMPLE)
    with pytest.raises(RuntimeError):
        job.result(10)
    assert len(asyncio.run(store.ablocks(clip, SAMPLE))) == 2 * len(SAMPLE)

    missing = str(tmp_path / "missing.mp4")
    plain = FrameStore()
    plain.start_encoding(missing, SAMPLE)
    with pytest.raises(VideoError):  # the video's own error, as without the job
        asyncio.run(plain.ablocks(missing, SAMPLE))


def _agent(store: FrameStore, script: dict):
    from langgraph.checkpoint.memory import InMemorySaver

    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.testing import ScriptedChatModel
    from tools.motion import LKTracker

    model = ScriptedChatModel(script)
    agent = build_reward_agent(AgentConfig(preset="full"), backbone=Backbone(model, retry_wait=(0.0, 0.0)),
                               tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()),
                               checkpointer=InMemorySaver(), frame_store=store)
    return agent, model


def test_a_run_starts_encoding_the_sample_in_the_quality_node_and_encodes_each_image_once(clip, monkeypatch):
    started = []
    original = FrameStore.start_encoding

    def spy(self, video, indices):
        started.append((video, list(indices)))
        return original(self, video, indices)

    monkeypatch.setattr(FrameStore, "start_encoding", spy)
    store = FrameStore(long_side=64)
    script = full_script(inspect=[tool_call("view_crop", {"frame": 20, "box": [0.2, 0.2, 0.8, 0.8]}), "seen"])
    agent, model = _agent(store, script)
    out = run(agent, clip)
    assert out["result"].status == "scored"
    assert started == [(clip, out["sample"])]
    urls = [b["image_url"]["url"] for call in model.calls for m in call.messages if isinstance(m, HumanMessage)
            and isinstance(m.content, list) for b in m.content if b.get("type") == "image_url"]
    assert store.encoded == len(set(urls)) > len(out["sample"])  # sample + crop, each encoded once


def test_a_runs_probe_and_observe_encoding_are_its_only_jobs_queued_at_first(clip, monkeypatch):
    """The quality probe and observe's encoding (all the frame work before the first model call) go to the "cpu"
    pool at priority "first"; the run's later jobs (views, crops, tracks, surprise) do not. The "io" lane's
    "first" jobs are only the clip-stamp stats each node makes before it runs (`graph.clip_stamp`: a stat, no
    frame work, ahead of the lane's network waits)."""
    from graph import workers

    queued: list[tuple[str, str, str]] = []
    original = workers.PriorityPool.submit
    cpu = workers.pool("cpu")

    def spy(self, fn, priority="now", order=None):
        target = fn.args[0]  # submit wraps the job as partial(context.run, job, ...)
        while isinstance(target, functools.partial):
            target = target.func
        queued.append(("cpu" if self is cpu else "io", priority, getattr(target, "__name__", type(target).__name__)))
        return original(self, fn, priority, order)

    monkeypatch.setattr(workers.PriorityPool, "submit", spy)
    agent, _ = _agent(FrameStore(long_side=64), full_script())
    assert run(agent, clip)["result"].status == "scored"
    assert sorted(name for lane, prio, name in queued if lane == "cpu" and prio == "first") == [
        "_encode", "_probe_and_check"]
    assert {name for lane, prio, name in queued if lane == "io" and prio == "first"} == {"state_clip_change"}
    assert len(queued) > 2  # the run's other jobs were queued too, at "now" or "later"
