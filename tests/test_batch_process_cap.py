"""`--processes` above `--concurrency` started workers that could never get a run (at most `concurrency` are in
flight over all of them) and each still loaded the tool models. The batch starts at most `concurrency` workers and
says so."""

from __future__ import annotations

import json
import multiprocessing as mp

from graph import batch_procs
from graph.batch import RowWriter
from graph.settings import BackboneSettings
from tests.batch_fakes import fake_worker


class _CountingContext:
    """The spawn context, counting the processes started."""

    def __init__(self) -> None:
        self.real, self.started = mp.get_context("spawn"), 0

    def Pipe(self, *args):  # noqa: N802, ANN002, ANN201 - multiprocessing's name
        return self.real.Pipe(*args)

    def Process(self, *args, **kwargs):  # noqa: N802, ANN002, ANN003, ANN201
        self.started += 1
        return self.real.Process(*args, **kwargs)


def test_no_more_workers_start_than_runs_may_be_in_flight(monkeypatch, tmp_path):
    counting = _CountingContext()
    monkeypatch.setattr(batch_procs, "worker_main", fake_worker)
    monkeypatch.setattr("tests.batch_fakes.DELAY_S", 0.1)
    monkeypatch.setattr(batch_procs.mp, "get_context", lambda method: counting)
    items = [{"key": f"k{i}", "line": i, "path": f"/x/c{i}.mp4", "written": f"c{i}.mp4", "instruction": "push",
              "preset": "direct", "draw": 0, "manifest": {}, "error": None} for i in range(4)]
    out, logged = tmp_path / "out.jsonl", []
    counts = batch_procs.run_batch_processes(items, RowWriter(out), settings=BackboneSettings(), preset="direct",
                                             processes=3, concurrency=2, log=logged.append)
    assert counts["scored"] == 4 and len(out.read_text().splitlines()) == 4
    assert counting.started == 2, logged
    assert any("--processes 3" in line and "--concurrency 2" in line for line in logged), logged
    assert all(json.loads(line)["result"]["status"] == "scored" for line in out.read_text().splitlines())
