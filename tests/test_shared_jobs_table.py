"""The shared-job table (`graph.shared_jobs`) trims its oldest finished jobs after adding one. A job that finished
before the trim (a quick job, or one that failed at once: a worker thread may run it between `submit` and the trim)
could be trimmed itself: a new key when every older entry was still in flight, or a failed job's key started afresh,
which keeps that key's old, early place in the table. `start` then raised KeyError from `move_to_end` (the caller's
run ended ineligible, "internal") and the table lost the job it had just handed out. The job just started is never
trimmed; the others are, oldest finished first."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from graph import shared_jobs
from graph.shared_jobs import SharedJobs


def pending() -> Future:
    return Future()


def finished(value: object = "done") -> Future:
    job: Future = Future()
    job.set_result(value)
    return job


@pytest.fixture
def small_table(monkeypatch: pytest.MonkeyPatch) -> SharedJobs:
    monkeypatch.setattr(shared_jobs, "_MAX_JOBS", 2)
    return SharedJobs()


def queue(monkeypatch: pytest.MonkeyPatch, job: Future) -> None:
    monkeypatch.setattr(shared_jobs, "submit", lambda *a, **k: job)


def test_a_new_job_finished_at_once_is_not_trimmed_while_the_others_run(small_table, monkeypatch):
    for k in range(3):
        queue(monkeypatch, pending())
        small_table.start(("run", k), lambda: None, "now", "cpu")
    quick = finished()
    queue(monkeypatch, quick)
    job, _ = small_table.start(("quick",), lambda: None, "now", "cpu")
    assert job is quick
    assert small_table.get(("quick",)) is quick


def test_a_failed_job_started_afresh_keeps_its_new_job(small_table, monkeypatch):
    failing: Future = Future()
    queue(monkeypatch, failing)
    small_table.start(("old",), lambda: None, "now", "cpu")  # in flight: kept at its early place
    for k in range(2):  # still running: the table is over its cap of finished jobs to trim
        queue(monkeypatch, pending())
        small_table.start(("other", k), lambda: None, "now", "cpu")
    failing.set_exception(RuntimeError("boom"))
    again = finished("fixed")
    queue(monkeypatch, again)
    job, _ = small_table.start(("old",), lambda: None, "now", "cpu")  # failed: started afresh
    assert job is again and small_table.get(("old",)) is again
    assert len(small_table.snapshot()) == 3  # nothing else finished: nothing else to trim


def test_the_oldest_finished_jobs_still_leave_first(small_table, monkeypatch):
    for k in range(4):
        queue(monkeypatch, finished())
        small_table.start(("done", k), lambda: None, "now", "cpu")
    assert [key for key, _ in small_table.snapshot()] == [("done", 2), ("done", 3)]
