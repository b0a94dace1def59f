"""A results path that is a FIFO (``<(...)``) read as missing (`is_file` is false for a FIFO that is there): "results
file not found" in `raa eval draws` / `raa eval compare`, "no evaluation results" in `raa eval report`. It is named
now, as a folder is."""

from __future__ import annotations

import os

import pytest

from evals.batch_rows import read_results_file
from evals.report_index import write_eval_index
from evals.result_rows import ManifestError
from tests.fifo_files import call_unblocked


def test_a_fifo_results_file_is_named_as_one(tmp_path):
    fifo = tmp_path / "out.jsonl"
    os.mkfifo(fifo)
    assert read_results_file(fifo) == (f"{fifo} is a FIFO, not a results file (give the file `raa score-batch "
                                       "--out` wrote)", b"")
    assert read_results_file(tmp_path) == (f"{tmp_path} is a folder, not a results file (give the file "
                                           "`raa score-batch --out` wrote)", b"")
    assert read_results_file(tmp_path / "none.jsonl") == (f"results file not found: {tmp_path / 'none.jsonl'}", b"")


def test_the_report_names_a_fifo_results_file_not_no_results(tmp_path):
    """`raa eval report DIR` with DIR/results.jsonl a FIFO said "no evaluation results in DIR": the file is there.
    It is refused as `evals.result_rows` refuses any results.jsonl that is no file, naming it."""
    os.mkfifo(tmp_path / "results.jsonl")
    with pytest.raises(ManifestError, match=rf"^{tmp_path / 'results.jsonl'} is not a file"):
        call_unblocked(lambda: write_eval_index(tmp_path), tmp_path / "results.jsonl")


@pytest.mark.parametrize("make", [os.mkfifo, os.mkdir], ids=["fifo", "folder"])
def test_the_reports_refusal_advises_what_the_report_can_do(tmp_path, make):
    """The report's refusal ended "results are written there; move it away or choose another --out", the advice of
    `raa eval reward`, which writes results.jsonl: `raa eval report DIR` has no --out and writes no results there.
    It says what the report reads and which folder to give it; the reward run keeps its advice."""
    results = tmp_path / "results.jsonl"
    make(results)
    with pytest.raises(ManifestError) as refused:
        call_unblocked(lambda: write_eval_index(tmp_path), results)
    assert str(refused.value) == (f"{results} is not a file: `raa eval report` reads the rows `raa eval reward --out` "
                                  "wrote there; give it a folder that run wrote")


@pytest.mark.parametrize("make", [os.mkfifo, os.mkdir], ids=["fifo", "folder"])
def test_the_reward_runs_refusal_keeps_its_advice(tmp_path, make):
    """`raa eval reward --out DIR` appends to DIR/results.jsonl: its refusal of one that is no file still says so
    (`results_lines`' advice is the command's; the report's words are not the run's)."""
    import asyncio

    from evals.reliability import run_reward_eval
    from evals.reward_scorer import EvalClip

    results = tmp_path / "results.jsonl"
    make(results)
    clip = EvalClip(str(tmp_path / "a.mp4"), "push", "failure", "-", "")
    with pytest.raises(ManifestError) as refused:
        call_unblocked(lambda: asyncio.run(run_reward_eval([clip], ["full"], tmp_path, scorer=None,  # type: ignore[arg-type]
                                                           judge=None)), results)
    assert str(refused.value) == f"{results} is not a file: results are written there; move it away or choose another --out"
