"""A process that forks after decoding or scoring (`multiprocessing`'s default start method on Linux,
DataLoader workers) gets a child that can decode and run pool jobs (`tools.video_reformat`, `graph.workers`).

Each scenario runs in a fresh interpreter under `tests.launches.launch`, so a regression fails instead of hanging
the suite: past its deadline the scenario and every child it forked are killed (``subprocess.run(timeout=...)``
killed the scenario alone, and a hung forked child held the output pipe ``run`` then read to its end, for ever).
A scenario kills a forked child it gave up on, and a forked child always ends with ``os._exit``."""

from __future__ import annotations

import sys
import textwrap

import pytest

from tests.launches import launch

SCENARIO = textwrap.dedent("""
    import asyncio, sys
    from graph.workers import run_blocking
    from tests.fork_child import forked_child
    from tools.video import read_all_frames

    clip, parent, child = sys.argv[1:4]

    def decode(where):
        if where == "main":
            return read_all_frames(clip).shape
        if where == "pool":
            return asyncio.run(run_blocking(read_all_frames, clip)).shape
        return None

    def in_child(queue):
        queue.put(decode(child))

    expected = decode(parent)
    exitcode, got = forked_child(in_child, join_s=20)
    assert exitcode == 0 and (got is None or got == expected), (exitcode, got, expected)
    print("ok", got)
""")


@pytest.mark.parametrize(("parent", "child"), [
    ("pool", "none"),  # Python frees the worker threads' thread-locals in the child: their reformatters hung
    ("pool", "pool"),  # the child's jobs went to the parent's pool, whose threads do not exist there
    ("main", "main"),  # the forking thread's reformatter, reused in the child, waited for the parent's slice threads
])
def test_a_child_forked_after_decoding_decodes_and_runs_pool_jobs(clip, parent, child):
    proc = launch([sys.executable, "-c", SCENARIO, str(clip), parent, child], timeout=90, what="the fork scenario")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("ok")


def test_reformatters_of_ended_threads_are_freed_by_the_next_one_made():
    import os
    import threading

    from tools import video_reformat

    def make() -> None:
        video_reformat.reformatter()

    for _ in range(5):
        t = threading.Thread(target=make)
        t.start()
        t.join()
    mine = [k for k in video_reformat._KEPT if k[0] == os.getpid()]
    assert sum(not t.is_alive() for _, t, _ in mine) <= 1  # only the last ended thread's, until the next is made
    assert video_reformat.reformatter() is video_reformat.reformatter()


BRIDGE_SCENARIO = textwrap.dedent("""
    import asyncio, os, signal, sys, threading, traceback
    from graph import bridge
    from graph.bridge import run_sync
    from tests.fork_child import held_by_another_thread

    async def where():
        return threading.current_thread().name

    assert run_sync(where()) == "raa-sync-loop"
    go = threading.Event()
    if sys.argv[1] == "lock":  # another thread holds the bridge's lock at the fork
        held_by_another_thread(bridge._lock, go)
    else:  # a call made on the bridge thread blocks it at the fork (the stall counter is 1)
        entered = threading.Event()

        async def inner():
            entered.set()
            await asyncio.to_thread(go.wait)

        async def outer():
            return run_sync(inner())

        threading.Thread(target=run_sync, args=(outer(),), daemon=True).start()
        entered.wait()
    pid = os.fork()
    if pid == 0:  # ends with os._exit whatever happens: an exception went on to run the parent's code
        signal.alarm(20)  # a hung child ends by SIGALRM instead of hanging the test
        try:
            os._exit(0 if run_sync(where()) == "raa-sync-loop" else 3)
        except BaseException:
            traceback.print_exc()
            os._exit(4)
    go.set()
    _, status = os.waitpid(pid, 0)
    print("child", os.waitstatus_to_exitcode(status))
""")


@pytest.mark.parametrize("state", [
    "lock",  # the child inherited the lock held by a parent thread: its first sync call waited forever
    "stalled",  # the child inherited the parent's stall count: every sync call ran on a fresh loop of its own
])
def test_a_child_forked_while_the_bridge_is_busy_runs_sync_calls_on_its_own_loop(state):
    proc = launch([sys.executable, "-c", BRIDGE_SCENARIO, state], timeout=90, what="the bridge fork scenario")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "child 0", proc.stdout + proc.stderr
