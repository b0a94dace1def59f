"""Tool jobs: speculative motion tracks (`AgentConfig.motion_prefetch`), FrameStore's shared track
jobs, and the worker lane of remote tools."""

from __future__ import annotations

import threading

import pytest
from graph_scripts import FailingTracker, full_script, grid_followup, make_agent, nodes, run, tool_call

from graph import AgentConfig
from graph.frame_store import FrameStore
from tools.errors import ToolFault
from tools.motion import LKTracker

WHOLE_CLIP = {"start_frame": 0, "end_frame": 32, "points": []}  # track_motion's default stretch of a 33-frame clip


class CountingTracker(LKTracker):
    """LK, counting its calls (from any thread)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self._lock = threading.Lock()
        self.done = threading.Event()

    def track(self, frames, *, grid_size=None, queries=None):
        with self._lock:
            self.calls += not grid_followup(frames, queries)  # a grid track's second call is the same job
        try:
            return super().track(frames, grid_size=grid_size, queries=queries)
        finally:
            self.done.set()

    def settled_calls(self, timeout: float = 0.5) -> int:
        """Calls so far, after giving a speculative job that may still be queued time to run."""
        self.done.wait(timeout)
        return self.calls


class FailsOnce(LKTracker):
    """Fails its first call (as a flaky remote tracker might), then tracks; `failed` is set after the failure."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.failed = threading.Event()

    def track(self, frames, *, grid_size=None, queries=None):
        self.calls += not grid_followup(frames, queries)  # a grid track's second call is the same job
        if self.calls == 1:
            self.failed.set()
            raise ToolFault("motion", "run", "transient failure")
        return super().track(frames, grid_size=grid_size, queries=queries)


def _tracked(prefetch: str, clip, tracker, script: dict | None = None) -> dict:
    script = script or full_script(inspect=[tool_call("track_motion", WHOLE_CLIP), "done"])
    agent, _ = make_agent("full", script, tracker=tracker, motion_prefetch=prefetch)
    return run(agent, clip, run_id=f"run-{prefetch}")


def test_prefetched_track_is_the_one_the_tool_call_returns(clip):
    """The speculative track is reused by the matching tool call: one tracker call, same evidence."""
    outs = {}
    for prefetch in ("grid", "off"):
        tracker = CountingTracker()
        outs[prefetch] = _tracked(prefetch, clip, tracker)
        assert tracker.calls == 1, prefetch
    grid, off = outs["grid"], outs["off"]
    assert grid["exchanges"][0]["name"] == "track_motion"
    assert grid["exchanges"] == off["exchanges"]  # same summary text, overlay frames and references
    assert grid["result"].reward == off["result"].reward and grid["result"].status == "scored"


def test_prefetch_is_speculative_work_only_when_motion_is_on(clip):
    """grid: one track even when the model never asks; off: none; motion off: none either way."""
    no_track = full_script()  # inspect views frames only
    for prefetch, expected in (("grid", 1), ("off", 0)):
        tracker = CountingTracker()
        out = _tracked(prefetch, clip, tracker, no_track)
        assert out["result"].status == "scored"  # the run does not wait for speculative work it never used
        assert tracker.settled_calls(timeout=10 if expected else 0.5) == expected, prefetch
    tracker = CountingTracker()
    agent, _ = make_agent("no_motion", full_script(), tracker=tracker, motion_prefetch="grid")
    assert run(agent, clip)["result"].status == "scored" and tracker.settled_calls() == 0


def test_a_failing_speculative_track_never_decides_a_run_the_model_did_not_ask_for(clip):
    out = _tracked("grid", clip, FailingTracker(), full_script())
    assert out["result"].status == "scored" and not out.get("faults")


def test_a_failing_track_the_model_asked_for_is_still_a_fault(clip):
    for prefetch in ("grid", "off"):
        res = _tracked(prefetch, clip, FailingTracker())["result"]
        assert res.status == "ineligible" and any("tracker crashed" in r for r in res.reasons), prefetch


def test_a_failed_speculative_track_is_run_again_when_asked_for(clip):
    tracker = FailsOnce()

    def ask_after_the_prefetch_failed(messages, k):
        if k > 0:
            return "done"
        assert tracker.failed.wait(10)  # the speculative track has failed before the model asks
        return tool_call("track_motion", WHOLE_CLIP)

    out = _tracked("grid", clip, tracker, full_script(inspect=ask_after_the_prefetch_failed))
    assert out["result"].status == "scored" and tracker.calls == 2
    assert "Motion tracks" in out["exchanges"][0]["text"] and "tool_call" in nodes(out)


def test_a_speculative_job_failing_while_awaited_is_retried_but_an_asked_for_failure_is_not():
    import asyncio

    store = FrameStore()
    started, release = threading.Event(), threading.Event()

    def flaky() -> None:
        started.set()
        release.wait(5)
        raise ToolFault("motion", "run", "transient failure")

    store.shared_job("k", flaky, "later")
    assert started.wait(5)  # the speculative job is running

    async def ask() -> list[str]:  # two runs waiting on the same speculative job: both get the retry's answer
        waiting = [asyncio.ensure_future(store.atracks("k", lambda: "tracks")) for _ in range(2)]
        await asyncio.sleep(0.05)
        release.set()
        return list(await asyncio.gather(*waiting))

    assert asyncio.run(ask()) == ["tracks", "tracks"]  # the second waiter used to get the speculative failure

    def broken() -> None:
        raise ToolFault("motion", "run", "tracker crashed")

    with pytest.raises(ToolFault, match="tracker crashed"):
        asyncio.run(store.atracks("other", broken))


def test_motion_prefetch_is_validated():
    with pytest.raises(ValueError, match="motion_prefetch"):
        AgentConfig(motion_prefetch="always")  # type: ignore[arg-type]
    assert AgentConfig().resolved().motion_prefetch == "grid"


def test_shared_job_is_shared_and_a_queued_later_job_is_promoted():
    store = FrameStore()
    gate = threading.Event()
    from graph.workers import cpu_workers, pool

    blockers = [pool("cpu").submit(gate.wait) for _ in range(cpu_workers())]  # every cpu thread busy
    calls: list[str] = []
    later = store.shared_job("k", lambda: calls.append("later") or "tracks-a", "later")
    assert store.shared_job("k", lambda: calls.append("dup") or "tracks-b", "later") is later  # shared
    now = store.shared_job("k", lambda: calls.append("now") or "tracks-c", "now")
    assert later.cancelled() and now is not later  # still queued: re-queued at "now"
    assert store.shared_job("k", lambda: "tracks-d", "now") is now
    gate.set()
    for b in blockers:
        b.result(timeout=5)
    assert now.result(timeout=5) == "tracks-c" and calls == ["now"]
    assert store.shared_job("k", lambda: "tracks-e", "now") is now  # finished jobs are reused


def test_shared_job_restarts_a_failed_job():
    store = FrameStore()

    def boom() -> None:
        raise ToolFault("motion", "run", "boom")

    failed = store.shared_job("k", boom, "now")
    with pytest.raises(ToolFault):
        failed.result(timeout=5)
    again = store.shared_job("k", lambda: "tracks", "now")
    assert again is not failed and again.result(timeout=5) == "tracks"


class ThreadRecordingScorer:
    """SurpriseScorer fake recording the thread it runs on."""

    def __init__(self) -> None:
        self.threads: list[str] = []

    def score(self, frames):
        from graph_scripts import FakeSurprise

        self.threads.append(threading.current_thread().name)
        return FakeSurprise().score(frames)


class ThreadRecordingTracker(LKTracker):
    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def track(self, frames, *, grid_size=None, queries=None):
        self.threads.append(threading.current_thread().name)
        return super().track(frames, grid_size=grid_size, queries=queries)


@pytest.mark.parametrize("lane", ["cpu", "io"])
def test_tools_of_the_tool_service_run_in_the_io_lane(clip, lane):
    from graph import build_reward_agent
    from graph.backbone import Backbone
    from graph.context import ToolProvider
    from graph.testing import ScriptedChatModel

    tracker, scorer = ThreadRecordingTracker(), ThreadRecordingScorer()
    tools = ToolProvider(lambda: tracker, lambda: scorer, tracker_lane=lane, surprise_lane=lane)
    script = full_script(inspect=[tool_call("track_motion", WHOLE_CLIP), "done"])
    agent = build_reward_agent(AgentConfig(preset="full"), backbone=Backbone(ScriptedChatModel(script)),
                               tools=tools, checkpointer=False)
    out = agent.invoke({"video": str(clip), "instruction": "push the red block to the right"})
    assert out["result"].status == "scored"
    assert tracker.threads and scorer.threads
    assert all(t.startswith(f"raa-{lane}-") for t in tracker.threads + scorer.threads), (tracker.threads,
                                                                                        scorer.threads)


def test_a_remote_toolbox_is_adapted_to_the_io_lane():
    from graph.context import AgentTools, tool_provider
    from tools.settings import ToolSettings
    from tools.toolbox import Toolbox

    def lanes(tools):
        provider = tool_provider(tools)
        return provider.tracker_lane, provider.surprise_lane

    assert lanes(Toolbox(ToolSettings(tools_url="http://127.0.0.1:9"))) == ("io", "io")  # nothing connects
    assert lanes(Toolbox(ToolSettings())) == ("cpu", "cpu")
    assert lanes(AgentTools(tracker=LKTracker())) == ("cpu", "cpu")
    from tools.client import RemoteSurpriseScorer, ToolServiceClient

    client = ToolServiceClient("http://127.0.0.1:9")  # builds an HTTP client; connects on first request
    try:
        assert tool_provider(AgentTools(tracker=LKTracker(), surprise=RemoteSurpriseScorer(client))).surprise_lane == "io"
    finally:
        client.close()


def test_cached_overlays_are_sized_by_their_image_urls():
    store = FrameStore(max_bytes=8 * 1000)  # 1000 bytes for derived artefacts
    image = [{"type": "text", "text": "frame 3"}, {"type": "image_url", "image_url": {"url": "x" * 600}}]
    store.put_extra("a", (image, "summary"))
    assert store.get_extra("a") is not None
    store.put_extra("b", (image, "summary"))  # 2 x ~614 bytes > 1000: the older one goes
    assert store.get_extra("a") is None and store.get_extra("b") is not None
    store.put_extra("c", ([{"type": "text", "text": "t"}], "s"))  # small entries fit beside it
    assert store.get_extra("b") is not None and store.get_extra("c") is not None


def test_track_summaries_name_the_clips_frames_not_positions_among_the_tracked_ones(tmp_path):
    """120 frames; a textured block moves only in frames 60..90. track_motion over 40..119 tracks 32 of
    those 80 frames: the summary must place the motion in 60..90 (it said 8..20: tracked positions)."""
    import re

    import cv2
    import numpy as np

    from tools.video import write_video

    rng = np.random.default_rng(5)
    bg = cv2.GaussianBlur(rng.integers(0, 255, (128, 128, 3), np.uint8), (0, 0), 2)
    patch = cv2.GaussianBlur(rng.integers(0, 255, (48, 48, 3), np.uint8), (0, 0), 1)
    frames = np.repeat(bg[None], 120, 0)
    for t in range(120):
        x = 8 + 2 * min(max(t - 60, 0), 30)  # still until 60, 2 px a frame until 90, then still
        frames[t, 40:88, x:x + 48] = patch
    clip = write_video(tmp_path / "late_motion.mp4", frames, fps=16.0)
    script = full_script(inspect=[tool_call("track_motion", {"start_frame": 40, "end_frame": 119}), "Seen."])
    agent, _ = make_agent("full", script, motion_prefetch="off")
    out = run(agent, clip, run_id="late")
    assert out["result"].status == "scored"
    text = next(x for x in out["exchanges"] if x.get("overlay"))["text"]
    spans = re.search(r"Motion in frames: ([0-9, -]+)\.", text)
    assert spans, text
    numbers = [int(v) for v in re.findall(r"\d+", spans.group(1))]
    assert numbers and min(numbers) >= 55 and max(numbers) <= 95, text
