"""`raa eval draws` / `raa eval compare` given a results path that is a FIFO (``<(...)``): it read "results file not
found" (`is_file` is false for a FIFO that is there). It is named now, as a folder is, and not opened."""

from __future__ import annotations

import os

from evals.batch_rows import results_file_problem


def test_a_fifo_results_file_is_named_as_one(tmp_path):
    fifo = tmp_path / "out.jsonl"
    os.mkfifo(fifo)
    assert results_file_problem(fifo) == (f"{fifo} is a FIFO, not a results file (give the file `raa score-batch "
                                          "--out` wrote)")
    assert results_file_problem(tmp_path) == (f"{tmp_path} is a folder, not a results file (give the file "
                                              "`raa score-batch --out` wrote)")
    assert results_file_problem(tmp_path / "none.jsonl") == f"results file not found: {tmp_path / 'none.jsonl'}"
