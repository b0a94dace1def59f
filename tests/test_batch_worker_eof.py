"""A worker whose pipe to the parent is at its end while its process is still alive (it shut the pipe, or its
interpreter takes a while to exit): the parent's wait returned at once for the readable end-of-file on every turn,
so it spun at full CPU until the process exited."""

from __future__ import annotations

import json

from graph import batch_procs
from graph.batch import RowWriter
from graph.settings import BackboneSettings
from tests.batch_fakes import LINGER_S, fake_worker


def test_a_worker_at_end_of_pipe_is_waited_on_not_polled(monkeypatch, tmp_path):
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
    assert counts == {"scored": 2, "zero": 0, "ineligible": 0}, logged
    assert sorted(json.loads(line)["line"] for line in out.read_text().splitlines()) == [0, 1]
    assert len(calls) < 10 * (LINGER_S + 5), len(calls)  # a wait per event or second, not thousands
