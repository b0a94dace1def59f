"""The frame cache follows the clip files (graph/frame_store.py). A clip rewritten at the same path is a new
video (`FrameStore.version`): for the agent, for the frame cache itself, and for requests served on the
event loop, which never stat a file. A clip deleted once scored is dropped from it (`FrameStore.forget`)
by the trainer's AgentReward and the reward service."""

from __future__ import annotations

import asyncio

import numpy as np
from graph_scripts import make_agent, moving_square, run, uniform_clip

from graph.frame_store import FrameStore
from tools.video import write_video


def test_a_clip_rewritten_at_the_same_path_is_scored_anew(tmp_path):
    """One agent, one path, two clips (a script writing rollout.mp4 for every sample): the second was
    scored on the first one's cached frames (0.975 for a flat grey clip that must get 0)."""
    agent, model = make_agent("full")
    path = tmp_path / "rollout.mp4"
    moving_square(path)
    first = run(agent, path, run_id="first")["result"]
    calls = len(model.calls)
    uniform_clip(path)
    second = run(agent, path, run_id="second")
    assert first.status == "scored" and first.reward > 0.5
    assert second["result"].status == "zero" and second["result"].reward == 0.0
    assert second["quality"]["uniform"] and len(model.calls) == calls  # zeroed before any model call
    moving_square(path, seed=3)  # rewritten again: scored from its own frames
    third = run(agent, path, run_id="third")["result"]
    assert third.status == "scored"


def test_frame_store_files_entries_under_the_file_version(tmp_path):
    """A file rewritten at the same path gets a new reader, new frames and new data URLs."""
    path = str(tmp_path / "clip.mp4")
    write_video(path, np.full((8, 32, 48, 3), 40, np.uint8), fps=8.0)
    store = FrameStore()
    old = store.version(path)
    assert store.meta(path).frames == 8 and int(store.frames(path, [0]).mean()) in range(35, 46)
    url = store.image_blocks(path, [0])[1]["image_url"]["url"]
    assert store.version(path) == old and store.image_blocks(path, [0])[1]["image_url"]["url"] is url  # cached
    write_video(path, np.full((12, 32, 48, 3), 200, np.uint8), fps=8.0)
    assert store.version(path) != old
    assert store.meta(path).frames == 12 and int(store.frames(path, [0]).mean()) in range(195, 206)
    assert store.image_blocks(path, [0])[1]["image_url"]["url"] != url
    assert store.version(str(tmp_path / "missing.mp4"))[1] is None


def test_ablocks_of_a_file_no_request_has_seen_finds_its_version_off_the_loop(tmp_path):
    """On the event loop the store only uses versions worker-thread requests remembered (a stat there is
    a blocking call); a first request for a file goes to a worker thread, later ones see rewrites."""
    path = str(tmp_path / "clip.mp4")
    write_video(path, np.full((8, 32, 48, 3), 40, np.uint8), fps=8.0)
    store = FrameStore()
    assert store.current(path) == (path, None)  # nothing stat'ed it yet, and current never does
    first = asyncio.run(store.ablocks(path, [0]))[1]["image_url"]["url"]
    assert store.current(path) == store.version(path)
    write_video(path, np.full((8, 32, 48, 3), 200, np.uint8), fps=8.0)
    assert asyncio.run(store.ablocks(path, [0]))[1]["image_url"]["url"] == first  # not stat'ed again yet
    store.meta(path)  # a worker-side request (a run's quality step) sees the new file
    assert asyncio.run(store.ablocks(path, [0]))[1]["image_url"]["url"] != first


def test_forget_drops_every_entry_of_a_clip_and_keeps_the_others(tmp_path):
    a, b = str(tmp_path / "a.mp4"), str(tmp_path / "b.mp4")
    for path, value in ((a, 40), (b, 200)):
        write_video(path, np.full((8, 32, 48, 3), value, np.uint8), fps=8.0)
    store = FrameStore()
    for path in (a, b):
        store.image_blocks(path, [0, 1])
        store.image_blocks(path, [2], box=[0.0, 0.0, 0.5, 0.5])
        store.start_encoding(path, [3]).result()
        store.put_extra(("overlay", store.current(path), (0, 1)), ([{"type": "text", "text": "x" * 10}], "t"))
    both = store.nbytes
    write_video(a, np.full((8, 32, 48, 3), 90, np.uint8), fps=8.0)  # a second version of a
    store.frames(a, [0])
    dropped = store.forget([a, str(tmp_path / "never-seen.mp4")])
    # a: 2 versions x 1 reader, 4 + 1 frames, 4 URLs, 1 extra, 1 encoding job
    assert dropped == 2 + 5 + 4 + 1 + 1
    assert 0 < store.nbytes < both and store.current(a) == (a, None)
    decoded = store.decoded
    assert store.forget([a]) == 0
    store.image_blocks(b, [0, 1])
    store.frames(b, [2, 3])
    assert store.decoded == decoded and store.get_extra(("overlay", store.current(b), (0, 1))) is not None  # b kept
    store.frames(a, [0])
    assert store.decoded == decoded + 1  # a is decoded afresh


def test_forget_cancels_a_queued_job_of_the_clip(tmp_path, monkeypatch):
    """A speculative job (a grid track at priority "later") still queued when its clip is forgotten never
    starts: the clip is being deleted and no run will ask for it."""
    from concurrent.futures import Future

    import graph.shared_jobs as shared_jobs

    queued: list[Future] = []
    monkeypatch.setattr(shared_jobs, "submit", lambda fn, priority, lane: queued.append(Future()) or queued[-1])
    store = FrameStore()
    a, b = str(tmp_path / "a.mp4"), str(tmp_path / "b.mp4")
    store.shared_job(("tracks", (a, None), (0, 1), ()), lambda: None, "later")
    store.shared_job(("tracks", (b, None), (0, 1), ()), lambda: None, "later")
    assert store.forget([a]) == 1
    assert queued[0].cancelled() and not queued[1].cancelled()


def test_work_still_running_for_a_forgotten_clip_does_not_refill_the_cache(tmp_path, monkeypatch):
    """The quality step starts encoding the observe frames; when the clip is zeroed the run ends while that
    job may still run, and the caller forgets (then deletes) the clip: the job's frames and URLs must not
    land in the cache afterwards. A file written anew at the path is another version and is cached."""
    from concurrent.futures import Future

    import graph.shared_jobs as shared_jobs

    started: list[tuple[Future, object]] = []

    def submit(fn, priority, lane):
        job = Future()
        job.set_running_or_notify_cancel()  # already running: forget cannot cancel it
        started.append((job, fn))
        return job

    monkeypatch.setattr(shared_jobs, "submit", submit)
    a = str(tmp_path / "a.mp4")
    write_video(a, np.full((8, 32, 48, 3), 40, np.uint8), fps=8.0)
    store = FrameStore()
    store.frames(a, [0])
    store.start_encoding(a, [0, 1, 2])
    assert store.forget([a]) > 0 and store.nbytes == 0
    job, fn = started[0]
    job.set_result(fn())  # the job finishes after the forget
    assert store.nbytes == 0 and store.encoded == 3
    store.frames(a, [0])  # asked for again: still not cached (the forgotten version)
    assert store.nbytes == 0
    write_video(a, np.full((8, 32, 48, 3), 90, np.uint8), fps=8.0)  # a new file at the path
    store.image_blocks(a, [0])
    assert store.nbytes > 0
