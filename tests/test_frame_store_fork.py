"""A process that forks while its FrameStore has shared jobs in flight, or while another thread holds the store's
lock (a script that scores a clip, then forks a `multiprocessing` pool whose workers score with the same agent),
gets a child whose store works: the parent's worker threads do not exist there, so a job they had queued or
running never finished in the child, and a child's run of the clip that waited for it hung.

Each scenario runs in a fresh interpreter; a child that does not end is killed and the scenario fails. The
scenario runs under `tests.launches.launch`: past its deadline it and every child it forked are killed
(``subprocess.run(timeout=...)`` killed the scenario alone, and a forked child held the output pipe ``run`` then
read to its end, for ever)."""

from __future__ import annotations

import sys
import textwrap

import pytest

from tests.launches import launch

SCENARIO = textwrap.dedent("""
    import asyncio, sys, threading
    from graph.frame_store import FrameStore
    from graph.workers import cpu_workers, submit
    from tests.fork_child import forked_child, held_by_another_thread

    clip, state = sys.argv[1:3]
    store = FrameStore()
    store.frames(clip, [0, 1])
    key = ("tracks", store.version(clip), (0, 1), (), 0)
    release = threading.Event()

    def hold(started):
        started.set()
        release.wait()
        return "parent"

    if state == "running":  # the job runs in a parent worker thread at the fork
        started = threading.Event()
        store.shared_job(key, lambda: hold(started))
        started.wait()
    elif state == "queued":  # every worker thread is busy: the job is still queued at the fork
        busy = [threading.Event() for _ in range(cpu_workers())]
        for event in busy:
            submit(hold, event, priority="first")
        for event in busy:
            event.wait()
        store.shared_job(key, lambda: "parent")
    else:  # another thread holds the store's lock at the fork
        held_by_another_thread(store._lock, release)

    def in_child(queue):
        tracks = asyncio.run(store.atracks(key, lambda: "child"))
        queue.put((tracks, store.frames(clip, [5, 6]).shape))

    exitcode, got = forked_child(in_child, join_s=30, after_join=release.set)
    assert exitcode == 0 and got[0] == "child" and got[1][0] == 2, (exitcode, got)
    print("ok", got)
""")


@pytest.mark.parametrize("state", ["running", "queued", "locked"])
def test_a_child_forked_with_shared_jobs_in_flight_computes_them_itself(clip, state):
    proc = launch([sys.executable, "-c", SCENARIO, str(clip), state], timeout=120, what="the frame store fork scenario")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("ok")
