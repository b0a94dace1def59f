"""Releases of a run id's claim that this process still has pending are waited for by its next claim of the id
(`graph.run_claims`): a retry right after a cancelled claim was refused as "already running" in its own process,
and a wait for the pending releases could meet a release thread not yet started (`RuntimeError`)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time

from graph import run_claims


def _claims(file: str) -> list[str]:
    conn = sqlite3.connect(file)
    try:
        return [row[0] for row in conn.execute(f"SELECT thread_id FROM {run_claims.CLAIMS_TABLE}")]
    finally:
        conn.close()


def test_a_retry_right_after_a_cancelled_claim_waits_for_its_release(tmp_path, monkeypatch) -> None:
    """The claim committed, then the caller was cancelled before the write's thread returned: that thread dropped
    the claim afterwards, but a retry of the id at once found it and was refused in its own process."""
    file = str(tmp_path / "traces.sqlite")
    sqlite3.connect(file).close()
    real, committed = run_claims._claim, threading.Event()

    def slow(file, run_id, max_age_s=run_claims.FOREIGN_CLAIM_MAX_AGE_S):
        holder = real(file, run_id, max_age_s)
        committed.set()
        time.sleep(0.3)  # the write's thread has not returned yet when the cancellation arrives
        return holder

    async def main():
        monkeypatch.setattr(run_claims, "_claim", slow)
        task = asyncio.ensure_future(run_claims.claim(file, "c1"))
        await asyncio.to_thread(committed.wait)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        monkeypatch.setattr(run_claims, "_claim", real)
        return await run_claims.claim(file, "c1")

    assert asyncio.run(main()) is None
    assert _claims(file) == ["c1"]
    run_claims.release_quietly(file, "c1")


def test_waiting_for_the_pending_releases_never_meets_an_unstarted_thread(tmp_path, monkeypatch) -> None:
    """`release_later` listed its thread before starting it: a claim of the id (or `join_releases`) in another
    thread between the two joined a thread not started yet, and failed with RuntimeError."""
    file = str(tmp_path / "traces.sqlite")
    assert run_claims.claim_blocking(file, "u1") is None
    errors: list[BaseException] = []

    def join() -> None:
        try:
            run_claims.join_releases(5, (file, "u1"))
        except BaseException as exc:  # noqa: BLE001 - the failure under test
            errors.append(exc)

    base = threading.Thread

    class Late(base):
        def start(self) -> None:
            waiter = base(target=join)
            waiter.start()
            waiter.join(0.3)  # another thread waits for the releases before this one starts
            super().start()
            self.waiter = waiter

    monkeypatch.setattr(run_claims.threading, "Thread", Late)
    run_claims.release_later(file, "u1")
    monkeypatch.undo()
    run_claims.join_releases(5)
    time.sleep(0.1)
    assert errors == [], errors
    assert _claims(file) == []


def test_the_apis_look_up_of_a_live_claim_waits_for_this_processs_pending_release(tmp_path, monkeypatch) -> None:
    """A retry of an id whose run just failed (its checkpoints saved, its release pending in a daemon thread) was
    answered "already running in process N" naming this very process, instead of "already has a trace"."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from graph.thread_claims import live_holder

    file = str(tmp_path / "traces.sqlite")
    assert run_claims.claim_blocking(file, "h1") is None
    real = run_claims.release_quietly

    def slow(file, run_id):
        time.sleep(0.3)
        real(file, run_id)

    monkeypatch.setattr(run_claims, "release_quietly", slow)
    run_claims.release_later(file, "h1")
    saver = SqliteSaver(sqlite3.connect(file, check_same_thread=False))
    try:
        assert asyncio.run(live_holder(saver, "h1", {"configurable": {"thread_id": "h1"}})) is None
    finally:
        saver.conn.close()


def test_the_apis_look_up_of_a_live_claim_does_not_wait_on_another_processs_write_lock(tmp_path, monkeypatch) -> None:
    """`live_holder` reads the claim on a connection with the trace file's busy timeout: on the trace file (WAL, as
    every saver sets it up) that read does not wait while another process holds the write lock, so the API's
    refusal of an id in flight comes at once, not after `WAIT_S`."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from graph.thread_claims import live_holder

    file = str(tmp_path / "traces.sqlite")
    saver = SqliteSaver(sqlite3.connect(file, check_same_thread=False))
    saver.setup()
    assert run_claims.claim_blocking(file, "w1") is None
    monkeypatch.setattr(run_claims, "WAIT_S", 3.0)
    other = sqlite3.connect(file, isolation_level=None)
    try:
        other.execute("BEGIN EXCLUSIVE")
        other.execute(f"DELETE FROM {run_claims.CLAIMS_TABLE}")
        start = time.monotonic()
        holder = asyncio.run(live_holder(saver, "w1", {"configurable": {"thread_id": "w1"}}))
        assert time.monotonic() - start < 1.5
        assert holder is not None and holder.startswith("process ")
    finally:
        other.close()
        run_claims.release_quietly(file, "w1")
        saver.conn.close()


def test_a_run_cancelled_while_its_claim_is_released_lets_a_retry_claim_the_id(tmp_path, monkeypatch) -> None:
    """The release at a run's end went on in its worker thread after a cancellation there (a run timeout), unseen
    by the next claim of the id in this process, which was refused as "already running" in its own process."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from graph.thread_claims import aclaimed

    file = str(tmp_path / "traces.sqlite")
    saver = SqliteSaver(sqlite3.connect(file, check_same_thread=False))
    real, releasing = run_claims.release_quietly, threading.Event()

    def slow(file, run_id):
        releasing.set()
        time.sleep(0.3)
        real(file, run_id)

    async def run() -> None:
        async with aclaimed(saver, {"configurable": {"thread_id": "e1"}}):
            monkeypatch.setattr(run_claims, "release_quietly", slow)

    async def main():
        task = asyncio.ensure_future(run())
        await asyncio.to_thread(releasing.wait)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        monkeypatch.setattr(run_claims, "release_quietly", real)
        return await run_claims.claim(file, "e1")

    try:
        assert asyncio.run(main()) is None
    finally:
        run_claims.release_quietly(file, "e1")
        saver.conn.close()


def test_a_ctrl_c_while_a_sync_runs_release_waits_on_the_lock_still_releases_the_claim(tmp_path, monkeypatch) -> None:
    """A sync run (`agent.invoke`, `stream`) released its claim at its end in the calling thread: a Ctrl-C while that
    release waited on another process's write lock rolled it back, and the claim stayed for the process's life, so
    every later run or resume of the id in that process (a notebook's kernel) was refused as "already running" in
    its own process. The release goes on in its thread, listed as pending, as an async run's does."""
    import signal

    import pytest
    from langgraph.checkpoint.sqlite import SqliteSaver

    from graph.thread_claims import claimed

    file = str(tmp_path / "traces.sqlite")
    saver = SqliteSaver(sqlite3.connect(file, check_same_thread=False))
    real, main = run_claims._release, threading.main_thread().ident
    other = sqlite3.connect(file, check_same_thread=False, isolation_level=None)

    def locked(file, run_id):  # another process takes the write lock as the run ends; the user presses Ctrl-C
        other.execute("BEGIN IMMEDIATE")
        threading.Timer(0.2, signal.pthread_kill, (main, signal.SIGINT)).start()
        threading.Timer(1.0, other.execute, ("COMMIT",)).start()
        real(file, run_id)

    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with claimed(saver, {"configurable": {"thread_id": "k1"}}):
                monkeypatch.setattr(run_claims, "_release", locked)
        monkeypatch.undo()
        run_claims.join_releases(run_claims.WAIT_S, (file, "k1"))
        assert _claims(file) == []
        assert run_claims.claim_blocking(file, "k1") is None
    finally:
        signal.signal(signal.SIGINT, handler)
        run_claims.release_quietly(file, "k1")
        saver.conn.close()
        other.close()
