"""The bridge loop at interpreter exit (graph/bridge.py `_wind_down`): its daemon thread is stopped, and its
pending tasks cancelled and awaited, before Python finalizes, instead of being left inside the loop."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import asyncio, atexit, sys, threading
    from graph.bridge import run_sync

    ended = []

    def check():  # registered before the bridge's own handler: atexit runs it after that one
        alive = [t.name for t in threading.enumerate() if t.name == "raa-sync-loop" and t.is_alive()]
        print(f"alive={alive} ended={ended}", flush=True)

    atexit.register(check)

    async def lingering():
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            ended.append("cancelled")
            raise

    async def start():
        asyncio.get_running_loop().create_task(lingering())  # a task someone started and never awaited
        await asyncio.sleep(0)
        return 7

    print(run_sync(start()), flush=True)
""")


def test_the_bridge_thread_ends_and_its_tasks_are_cancelled_before_exit():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["7", "alive=[]", "ended=['cancelled']"], proc.stdout + proc.stderr
    assert "Task was destroyed but it is pending" not in proc.stderr


def test_exit_does_not_wait_long_for_a_loop_blocked_by_a_sync_call():
    """A task that blocks the loop thread (sync code on it) cannot be stopped: exit waits a bounded time."""
    script = textwrap.dedent("""
        import asyncio, time
        import graph.bridge as bridge
        from graph.bridge import run_sync
        bridge._EXIT_WAIT_S = 0.5

        async def start():
            asyncio.get_running_loop().call_later(0.3, time.sleep, 30)  # blocks the bridge thread after we return
            return 1

        print(run_sync(start()), flush=True)
        time.sleep(0.6)  # the loop thread is in its time.sleep now
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=25,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1"]


def test_a_call_from_an_exit_handler_after_the_wind_down_runs_and_leaves_no_bridge_thread():
    script = textwrap.dedent("""
        import asyncio, atexit, threading
        from graph.bridge import run_sync

        def late():  # registered before the bridge's handler: runs after the wind-down
            print(run_sync(asyncio.sleep(0, result=5)), flush=True)
            print(sum(t.name == "raa-sync-loop" and t.is_alive() for t in threading.enumerate()), flush=True)

        atexit.register(late)
        print(run_sync(asyncio.sleep(0, result=3)), flush=True)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["3", "5", "0"], proc.stdout + proc.stderr
