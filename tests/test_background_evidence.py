"""Evidence the reward agent computes in the background (surprise scores, extra tools: graph.nodes.background,
graph.nodes.surprise): it never holds up assess, its failures are faults of its own stage, and surprise scores
are shared by the runs of a clip that share a frame cache, with a scripted backbone (no network)."""

from __future__ import annotations

import pytest
from graph_scripts import (
    OBSERVATION,
    FailingSurprise,
    FakeSurprise,
    assessment,
    full_script,
    job_priorities_script,
    make_agent,
    moving_square,
    nodes,
    run,
    tool_call,
)


def test_surprise_fault_gives_ineligible(clip):
    agent, model = make_agent("full", surprise=FailingSurprise())
    res = run(agent, clip)["result"]
    assert res.reward is None and any(r.startswith("surprise: tool: ") for r in res.reasons), res.reasons
    assert model.calls_for("reflect") == []  # the fault ends the run before the stage that would show it


def test_a_surprise_failure_known_before_assess_stops_the_model_calls(clip):
    """The scoring runs beside observe and contract; once it has failed, assess makes no model call and the
    fault is recorded under surprise, not under the node that found it."""
    from graph.frame_store import FrameStore

    store = FrameStore()

    def observe_after_the_tools(_messages, _k):
        for _key, (job, _) in store._jobs.snapshot():  # the quality step's jobs (encoding, surprise) have ended
            job.exception(timeout=30)
        return OBSERVATION

    agent, model = make_agent("full", full_script(observe=observe_after_the_tools), surprise=FailingSurprise(),
                              frame_store=store)
    out = run(agent, clip)
    assert out["result"].reward is None and model.calls_for("assess") == []
    assert out["result"].reasons == ["surprise: tool: surprise run: V-JEPA 2 out of memory"]
    assess = next(s for s in out["steps"] if s["node"] == "assess")
    assert assess["decision"].startswith("fault (tool)") and nodes(out)[-1] == "gate"


def test_a_slow_surprise_scorer_does_not_hold_up_assess(clip):
    """Only reflect uses the scores: the scorer may still be running while assess and the inspect loop call
    the model (the scorer here waits until assess has been called; the old join would have deadlocked)."""
    import threading

    assessed = threading.Event()

    class SlowSurprise(FakeSurprise):
        released = False

        def score(self, frames):
            self.released = assessed.wait(timeout=30)
            return super().score(frames)

    def assess_reply(_messages, _k):
        assessed.set()
        return assessment()

    scorer = SlowSurprise()
    agent, model = make_agent("full", full_script(assess=assess_reply), surprise=scorer)
    out = run(agent, clip)
    assert out["result"].status == "scored" and scorer.released and scorer.calls == 1
    seq = nodes(out)
    assert seq.index("assess") < seq.index("tool_call") < seq.index("surprise") == seq.index("reflect") - 1
    step = next(s for s in out["steps"] if s["node"] == "surprise")
    assert "scored in " in step["decision"] and "world-model surprise" in model.calls_for("reflect")[0].text().lower()


def test_surprise_waits_at_later_priority_until_assess(clip, monkeypatch):
    """The quality step queues the scoring at "later" (other runs' first model calls go first) and assess
    moves it to "now". With no slot for "later" jobs, a scoring nobody moved would never run: the run
    finishes only because assess moved it, and observe still sees it queued at "later"."""
    import graph.workers as workers
    from graph.frame_store import FrameStore

    store = FrameStore()
    script, seen = job_priorities_script(store, "surprise")
    monkeypatch.setattr(workers, "LATER_SLOTS", 0)
    agent, _ = make_agent("full", script, frame_store=store)
    out = run(agent, clip)
    assert out["result"].status == "scored", out["result"].reasons
    assert seen["observe"] == [(False, "later")]
    assert [queued_at for _, queued_at in seen["assess"]] == ["now"]


def test_surprise_is_scored_once_per_clip_version_and_a_failure_is_retried_by_the_next_run(tmp_path):
    """Runs sharing a frame cache share a clip's scores (like its motion tracks); a rewritten clip is scored
    anew; a failed scoring does not stick to the clip."""

    class FlakySurprise(FakeSurprise):
        def score(self, frames):
            if self.calls == 0:
                self.calls += 1
                raise RuntimeError("CUDA out of memory")
            return super().score(frames)

    clip = moving_square(tmp_path / "c.mp4")
    scorer = FlakySurprise()
    agent, _ = make_agent("full", surprise=scorer)
    first = run(agent, clip, run_id="r1")["result"]
    assert first.reward is None and any("CUDA out of memory" in r for r in first.reasons)
    assert run(agent, clip, run_id="r2")["result"].status == "scored" and scorer.calls == 2
    assert run(agent, clip, run_id="r3")["result"].status == "scored" and scorer.calls == 2  # shared
    moving_square(clip, seed=7)  # rewritten at the same path: another video
    assert run(agent, clip, run_id="r4")["result"].status == "scored" and scorer.calls == 3


def test_a_failed_surprise_does_not_touch_presets_without_wmreward(tmp_path):
    """Surprise jobs are shared by the runs of a clip that share a frame cache (raa eval reward's presets): a
    scorer that fails for `full` must not end the runs of presets that never use it."""
    from graph.frame_store import FrameStore

    clip, store = moving_square(tmp_path / "c.mp4"), FrameStore()
    full, _ = make_agent("full", surprise=FailingSurprise(), frame_store=store)
    assert run(full, clip, run_id="f")["result"].reward is None
    for preset in ("no_wmreward", "motion", "visual_verify", "structured"):
        agent, _ = make_agent(preset, surprise=FailingSurprise(), frame_store=store)
        res = run(agent, clip, run_id=f"p-{preset}")["result"]
        assert res.status == "scored", (preset, res.reasons)


def test_scores_outlive_the_job_table(tmp_path, monkeypatch):
    """Finished scores are kept in the frame cache (bounded by bytes), not only in the bounded job table, so a
    clip's next run reuses them after hundreds of other jobs (a 100-clip, 14-preset evaluation)."""
    import graph.shared_jobs as jobs

    monkeypatch.setattr(jobs, "_MAX_JOBS", 1)
    clip, scorer = moving_square(tmp_path / "c.mp4"), FakeSurprise()
    agent, _ = make_agent("full", surprise=scorer)
    for k in range(3):
        assert run(agent, clip, run_id=f"r{k}")["result"].status == "scored"
    assert scorer.calls == 1


def test_cancelling_one_run_does_not_cancel_a_shared_job_for_another(caplog):
    """Two runs awaiting one shared job: cancelling the first leaves the job running for the second (a bare
    asyncio.wrap_future cancelled the queued job and the other run got CancelledError, which no stage
    catches); a job cancelled elsewhere (FrameStore.forget) is an ordinary JobCancelled error."""
    import asyncio
    import threading
    from concurrent.futures import Future

    from graph.workers import JobCancelled, await_job

    async def main() -> None:
        job: Future = Future()
        first = asyncio.ensure_future(await_job(job))
        second = asyncio.ensure_future(await_job(job))
        await asyncio.sleep(0)
        first.cancel()
        await asyncio.sleep(0)
        assert not job.cancelled()
        threading.Timer(0.05, job.set_result, args=("tracks",)).start()
        assert await second == "tracks" and first.cancelled()
        failing: Future = Future()  # its waiter cancelled, then the job fails: nothing to log
        abandoned = asyncio.ensure_future(await_job(failing))
        await asyncio.sleep(0)
        abandoned.cancel()
        await asyncio.sleep(0)
        failing.set_exception(RuntimeError("boom"))
        await asyncio.sleep(0.05)
        gone: Future = Future()
        waiting = asyncio.ensure_future(await_job(gone))
        await asyncio.sleep(0)
        gone.cancel()
        with pytest.raises(JobCancelled):
            await waiting

    import gc
    import logging

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        asyncio.run(main())
        gc.collect()
    assert "never retrieved" not in caplog.text


def test_reflect_request_stays_within_the_image_cap(clip):
    """Surprise windows (up to 4 frames each) and extra-tool frames are shown before the inspection images, which
    are trimmed to fit; with many windows they alone passed max_images_per_call (the server refuses such a
    request). The windows are 2 frames (1 context, 1 predicted) so that 30 of them predict distinct frames
    (reflect shows only windows whose predicted frames do not overlap): 2 images each, 60 in all."""
    from tools.surprise import SurpriseEvidence, SurpriseWindow

    class ManyWindows:
        def score(self, frames):
            ws = [SurpriseWindow(start=s, end=s + 1, frames=[s, s + 1], surprise=1.0 - s / 100) for s in range(0, 32)]
            return SurpriseEvidence(status="ok", windows=ws, top=ws, mean=0.5, num_frames=len(frames), window_size=2,
                                    context_frames=1)

    agent, model = make_agent("full", surprise=ManyWindows(), surprise_windows=30)
    out = run(agent, clip)
    call = model.calls_for("reflect")[0]
    assert out["result"].status == "scored"
    assert call.images() == 48 and "of the evidence images above are left out" in call.text()
    step = next(s for s in out["steps"] if s["node"] == "reflect")
    assert step["frames"] == sorted(set(sent_frames(call)))  # it listed the frames of all 30 windows


def sent_frames(call) -> list[int]:
    """The frame of each image a scripted call sent, in order (from the label before it: "frame 12 of 33, ...")."""
    return [int(blocks[k - 1]["text"].split()[1]) for m in call.messages if not isinstance(blocks := m.content, str)
            for k, b in enumerate(blocks) if b.get("type") == "image_url"]


def test_reflect_trace_lists_the_frames_of_the_images_sent(clip):
    """The oldest inspection images past max_images_per_call are left out of reflect's request; its step's
    frames listed them all the same, so `raa trace` showed frames as used that the model never saw."""
    calls = [tool_call("view_frames", {"frames": list(r)}, f"c{k}") for k, r in enumerate([range(16), range(16, 32),
                                                                                              range(17, 33)])]
    agent, model = make_agent("full", full_script(inspect=[*calls, "done"]))
    out = run(agent, clip)
    sent = sent_frames(model.calls_for("reflect")[0])
    assert len(sent) == 48 and not {0, 1, 2, 3} & set(sent)  # 4 surprise frames and the last 44 of 48 inspected
    assert next(s for s in out["steps"] if s["node"] == "reflect")["frames"] == sorted(set(sent))
