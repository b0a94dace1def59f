"""graph.workers: results, exceptions, contextvars, lanes, run-age order, "first" and "later" priorities."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from graph import workers
from graph.workers import (
    IO_WORKERS,
    LATER_SLOTS,
    PriorityPool,
    cpu_workers,
    pool,
    run_blocking,
    run_scope,
    usable_cores,
)

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


def test_run_blocking_returns_result_in_a_worker_thread_with_the_callers_context():
    async def main() -> tuple[int, str, str]:
        VAR.set("caller")
        return await run_blocking(lambda a, b=0: (a + b, VAR.get(), threading.current_thread().name), 2, b=3)

    value, var, thread = asyncio.run(main())
    assert value == 5 and var == "caller"
    assert thread.startswith("raa-cpu-") and thread != threading.main_thread().name


def test_io_lane_is_a_separate_pool_and_the_cpu_lane_has_a_thread_per_core():
    async def main() -> str:
        return await run_blocking(lambda: threading.current_thread().name, lane="io")

    assert asyncio.run(main()).startswith("raa-io-")
    assert pool("io") is not pool("cpu") and pool("io").workers == IO_WORKERS
    assert pool("cpu").workers == cpu_workers() >= 2


def test_jobs_of_the_oldest_run_go_first_within_a_priority():
    """run_scope orders queued jobs by run age, not by submission: a run started earlier gets its
    frames first even when a younger run queued its job before it."""
    p = PriorityPool(1)
    gate = threading.Event()
    order: list[str] = []
    first = p.submit(gate.wait)  # occupies the only worker while the others queue
    queued = [p.submit(lambda n=name: order.append(n), prio, age) for name, prio, age in
              [("young-now", "now", 7), ("old-later", "later", 1), ("old-now", "now", 3), ("mid-now", "now", 5)]]
    gate.set()
    for f in [first, *queued]:
        f.result(timeout=5)
    assert order == ["old-now", "mid-now", "young-now", "old-later"]


def test_first_jobs_go_before_now_jobs_even_of_an_older_run():
    """"first" (the work before a run's first model call) outranks "now" whatever the run ages: the last of
    a burst of runs otherwise waited for the tool jobs of the runs that had started before it."""
    p = PriorityPool(1)
    gate = threading.Event()
    order: list[str] = []
    first = p.submit(gate.wait)  # occupies the only worker while the others queue
    queued = [p.submit(lambda n=name: order.append(n), prio, age) for name, prio, age in
              [("old-now", "now", 1), ("young-first", "first", 9), ("old-later", "later", 0),
               ("mid-first", "first", 5)]]
    gate.set()
    for f in [first, *queued]:
        f.result(timeout=5)
    assert order == ["mid-first", "young-first", "old-now", "old-later"]


def test_first_jobs_run_while_every_later_slot_is_taken():
    pool = PriorityPool(LATER_SLOTS + 1)
    gate, started = threading.Event(), threading.Semaphore(0)

    def later_job() -> None:
        started.release()
        gate.wait(5)

    futures = [pool.submit(later_job, "later") for _ in range(LATER_SLOTS + 1)]
    for _ in range(LATER_SLOTS):
        assert started.acquire(timeout=5)
    try:  # a "first" job neither waits for a later slot nor takes one
        assert pool.submit(lambda: "first done", "first").result(timeout=5) == "first done"
        assert not started.acquire(timeout=0.2)  # the extra "later" job is still queued
    finally:
        gate.set()
    for f in futures:
        f.result(timeout=5)


def test_run_scope_gives_each_run_key_a_stable_age():
    seen: dict[str, int | None] = {}

    async def job(key: str) -> None:
        with run_scope(key):
            seen[key] = await run_blocking(lambda: workers._RUN_ORDER.get())

    async def main() -> None:
        await job("run-a")
        await job("run-b")
        first_a = seen["run-a"]
        await job("run-a")  # a later stage of the same run keeps its age
        assert seen["run-a"] == first_a

    asyncio.run(main())
    assert seen["run-a"] is not None and seen["run-b"] is not None and seen["run-a"] < seen["run-b"]


def test_a_queued_job_can_be_cancelled_and_never_runs():
    p = PriorityPool(1)
    gate = threading.Event()
    ran: list[int] = []
    first = p.submit(gate.wait)
    queued = p.submit(lambda: ran.append(1), "later")
    assert queued.cancel()
    gate.set()
    first.result(timeout=5)
    assert p.submit(lambda: "after", "now").result(timeout=5) == "after"
    assert ran == [] and queued.cancelled()


def test_run_blocking_reraises_the_jobs_exception():
    def boom() -> None:
        raise KeyError("missing frame")

    with pytest.raises(KeyError, match="missing frame"):
        asyncio.run(run_blocking(boom, priority="later"))


def test_queued_now_jobs_run_before_queued_later_jobs():
    pool = PriorityPool(1)
    gate = threading.Event()
    order: list[str] = []
    first = pool.submit(gate.wait)  # occupies the only worker while the others queue
    later = [pool.submit(lambda i=i: order.append(f"later{i}"), "later") for i in range(2)]
    now = [pool.submit(lambda i=i: order.append(f"now{i}"), "now") for i in range(2)]
    gate.set()
    for f in [first, *later, *now]:
        f.result(timeout=5)
    assert order == ["now0", "now1", "later0", "later1"]


def test_at_most_later_slots_later_jobs_run_at_once_while_now_jobs_still_run():
    pool = PriorityPool(LATER_SLOTS + 1)
    gate = threading.Event()
    started = threading.Semaphore(0)
    running, peak, lock = [0], [0], threading.Lock()

    def later_job() -> None:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        started.release()
        gate.wait(5)
        with lock:
            running[0] -= 1

    futures = [pool.submit(later_job, "later") for _ in range(LATER_SLOTS + 2)]
    for _ in range(LATER_SLOTS):  # wait until every later slot is taken
        assert started.acquire(timeout=5)
    # the blocked "later" jobs hold every later slot; the spare worker still serves "now" work
    assert pool.submit(lambda: "now done", "now").result(timeout=5) == "now done"
    assert not gate.is_set() and sum(f.done() for f in futures) == 0
    with lock:
        assert running[0] == peak[0] == LATER_SLOTS  # the two extra later jobs are still queued
    gate.set()
    for f in futures:
        f.result(timeout=5)
    assert peak[0] == LATER_SLOTS


def test_pool_rejects_zero_workers():
    with pytest.raises(ValueError, match="workers"):
        PriorityPool(0)


def test_an_unknown_lane_is_refused_where_it_is_given_and_starts_no_pool():
    """A lane outside `Lane` used to start a pool of its own, and interpreter exit then failed on it with a
    KeyError (`EXIT_WAIT_S`) before shutting the remaining pools down."""
    before = dict(workers._POOLS)
    with pytest.raises(ValueError, match="'gpu'"):
        pool("gpu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'gpu'"):
        workers.submit(lambda: 1, lane="gpu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'gpu'"):
        asyncio.run(run_blocking(lambda: 1, lane="gpu"))  # type: ignore[arg-type]
    assert workers._POOLS == before


def test_an_unknown_priority_is_a_value_error_naming_it_and_the_allowed_ones():
    """It was a bare KeyError('soon') from the rank table, which said nothing of priorities."""
    p = PriorityPool(1)
    try:
        for bad in ("soon", None, 1):
            with pytest.raises(ValueError, match=r"unknown job priority .*: must be one of \('first', 'now', 'later'\)"):
                p.submit(lambda: 1, bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="'soon'"):
            workers.submit(lambda: 1, priority="soon")  # type: ignore[arg-type]
        assert p.submit(lambda: 2, "later").result(timeout=5) == 2  # the pool still works
    finally:
        p.shutdown(5)


def test_jobs_submitted_one_after_another_stay_on_one_thread():
    """LIFO wake-ups: the thread that just finished takes the next job (no rotation over the pool)."""
    pool = PriorityPool(4)
    names = [pool.submit(lambda: threading.current_thread().name).result(timeout=5) for _ in range(12)]
    assert len(set(names[1:])) == 1


def test_a_burst_of_jobs_still_spreads_over_every_thread():
    pool = PriorityPool(3)
    barrier = threading.Barrier(3, timeout=5)  # passes only if three jobs run at the same time
    futures = [pool.submit(lambda: (barrier.wait(), threading.current_thread().name)[1]) for _ in range(3)]
    assert len({f.result(timeout=10) for f in futures}) == 3


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="CPU affinity is Linux-only")
def test_cpu_lane_size_follows_the_process_cpu_affinity(monkeypatch):
    import os

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(6)))
    assert usable_cores() == cpu_workers() == 6
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3})
    assert usable_cores() == 1 and cpu_workers() == 2  # the lane never has fewer than two threads


def test_shutdown_cancels_queued_jobs_waits_for_running_ones_and_refuses_new_ones():
    pool = PriorityPool(1)
    started, release = threading.Event(), threading.Event()
    running = pool.submit(lambda: (started.set(), release.wait(5), "done")[2])
    queued = pool.submit(lambda: "never")
    assert started.wait(5)
    closer = threading.Thread(target=pool.shutdown)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive() and queued.cancelled()  # waits for the running job; the queued one is dropped
    release.set()
    closer.join(5)
    assert not closer.is_alive() and running.result(timeout=1) == "done"
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(lambda: 1)


def test_interpreter_exit_waits_for_a_running_opencv_job(tmp_path):
    """A worker still inside OpenCV when the interpreter finalized aborted the process (exit 134,
    "terminate called without an active exception") after the script had done its work: a speculative
    motion track nobody awaited did that to short `motion`-preset scripts. Exit now waits for the job."""
    import subprocess
    import sys
    import textwrap

    marker = tmp_path / "finished"
    script = textwrap.dedent(f"""
        import time, cv2, numpy as np
        from graph.workers import submit
        img = np.random.default_rng(0).integers(0, 255, (1024, 1024), dtype=np.uint8)
        started = time.perf_counter()
        def job():
            while time.perf_counter() - started < 1.0:
                cv2.GaussianBlur(img, (31, 31), 0)
            open({str(marker)!r}, "w").write("ok")
        submit(job, priority="later")
        time.sleep(0.2)  # the job is inside OpenCV when the main thread ends
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert marker.read_text() == "ok"


def test_shutdown_waits_at_most_wait_s_and_exit_does_not_wait_for_network_jobs():
    import subprocess
    import sys
    import time

    pool = PriorityPool(1)
    release = threading.Event()
    pool.submit(lambda: release.wait(30))
    t0 = time.monotonic()
    pool.shutdown(wait_s=0.2)
    assert time.monotonic() - t0 < 5
    release.set()
    # an "io" job (a tool-service request waiting on the network) does not hold up interpreter exit
    script = "import time\nfrom graph.workers import submit\nsubmit(time.sleep, 60, lane='io')\ntime.sleep(0.2)\n"
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert time.monotonic() - t0 < 30


def test_a_job_submitted_after_the_pools_shut_down_at_exit_is_refused():
    """A job submitted once the exit hook had shut the pools down (a later exit hook, a daemon thread still
    running) started fresh pools, whose threads nobody shut down: the teardown the exit hook prevents."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import atexit
        from graph import workers

        def late():  # registered before the pools' hook, so it runs after it
            try:
                print("ran", workers.submit(lambda: 1).result(timeout=10))
            except RuntimeError as exc:
                print("refused:", exc)
            print("pools", len(workers._POOLS))

        atexit.register(late)
        assert workers.submit(lambda: 1).result(timeout=10) == 1
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "refused:" in proc.stdout and "exiting" in proc.stdout, proc.stdout
    assert "pools 0" in proc.stdout
