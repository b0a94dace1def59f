"""A worker whose pipe to the parent is at its end while its process is still alive (it shut the pipe, or its
interpreter takes a while to exit): the parent's wait returned at once for the readable end-of-file on every turn,
so it spun at full CPU until the process exited."""

from __future__ import annotations

import json

from graph import batch_procs
from graph.batch import RowWriter
from graph.settings import BackboneSettings
from tests.batch_fakes import LINGER_S, fake_worker


def _lingering_batch(monkeypatch, tmp_path) -> tuple[dict, list[int], list[str]]:
    """A batch of 2 items in one worker, the first of which makes the worker shut its pipe and live on for
    LINGER_S: (counts, one entry per wait of the parent, the log)."""
    calls = []
    real_wait = batch_procs.wait

    def counting_wait(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - multiprocessing.connection.wait's
        calls.append(1)
        return real_wait(*args, **kwargs)

    monkeypatch.setattr(batch_procs, "worker_main", fake_worker)
    monkeypatch.setattr(batch_procs, "wait", counting_wait)
    items = [{"key": f"k{i}", "line": i, "path": f"/x/c{i}.mp4", "written": f"c{i}.mp4", "instruction": text,
              "preset": "direct", "draw": 0, "manifest": {}, "error": None}
             for i, text in enumerate(["LINGER push", "push"])]
    out, logged = tmp_path / "out.jsonl", []
    counts = batch_procs.run_batch_processes(items, RowWriter(out), settings=BackboneSettings(), preset="direct",
                                             processes=1, concurrency=1, log=logged.append)
    assert sorted(json.loads(line)["line"] for line in out.read_text().splitlines()) == [0, 1]
    return counts, calls, logged


def test_a_worker_at_end_of_pipe_is_waited_on_not_polled(monkeypatch, tmp_path):
    counts, calls, logged = _lingering_batch(monkeypatch, tmp_path)
    assert counts == {"scored": 2, "zero": 0, "ineligible": 0}, logged
    assert len(calls) < 10 * (LINGER_S + 5), len(calls)  # a wait per event or second, not thousands


def test_a_worker_whose_exit_hangs_past_the_stop_timeout_is_killed(monkeypatch, tmp_path):
    """With --run-timeout 0 nothing else ended a worker whose pipe was shut while its exit hung."""
    monkeypatch.setattr(batch_procs, "STOP_TIMEOUT_S", 0.3)
    counts, calls, logged = _lingering_batch(monkeypatch, tmp_path)
    assert counts["scored"] == 2 and any("signal 9" in line for line in logged), logged
