"""`raa score-batch --processes N` when the parent finds a worker's end only after the run's deadline has passed (a
loaded or stalled parent, tests/batch_fakes.py `parent_stalls`): the clip's ineligible row names the real cause of
each death, not a hang (before: the parent killed the worker as hung before burying it, and the row said "did not
finish within N s" for a crash or for the error the worker had already sent)."""

from __future__ import annotations

import multiprocessing as mp

from tests.batch_fakes import parent_stalls
from tests.test_batch_procs import _fake_batch


def test_a_crash_found_after_the_deadline_is_named_as_a_crash(monkeypatch, tmp_path) -> None:
    logged: list[str] = []
    parent_stalls(monkeypatch, 3600)
    counts, rows, logged = _fake_batch(monkeypatch, tmp_path, ["POISON push"], logged, processes=1, concurrency=1,
                                       run_timeout_s=5)
    assert counts == {"scored": 0, "zero": 0, "ineligible": 1}, logged
    result = rows[0]["result"]
    assert result["reasons"][0] == (
        "batch: internal: the worker process scoring this clip died (signal 9) on each of 2 attempts, the last with no "
        "other run in flight"), logged
    assert not any("was killed" in line for line in logged), logged
    assert mp.active_children() == []


def test_an_error_the_worker_sent_before_the_deadline_was_seen_is_named(monkeypatch, tmp_path) -> None:
    """Every attempt of the FLAKY clip fails as `worker_main` does on an exception (its first attempt's hang marker
    is already there): a "fatal" message, exit code 1."""
    monkeypatch.setenv("RAA_FAKE_DIR", str(tmp_path))
    (tmp_path / "flaky-k0").touch()
    logged: list[str] = []
    parent_stalls(monkeypatch, 3600)
    counts, rows, logged = _fake_batch(monkeypatch, tmp_path, ["FLAKY push"], logged, processes=1, concurrency=1,
                                       run_timeout_s=5)
    assert counts == {"scored": 0, "zero": 0, "ineligible": 1}, logged
    assert rows[0]["result"]["reasons"][0] == (
        "batch: internal: the worker process scoring this clip died (exit code 1: RuntimeError: decoder state corrupt) "
        "on each of 2 attempts, the last with no other run in flight"), logged
    assert not any("was killed" in line for line in logged), logged
