"""A batch stopped by an error mid-run ends as one stopped by Ctrl-C: the closing lines of the rows it wrote (counts by
status, what they cost, the faults of the ineligible ones), then the error and how to resume, exit 2.

No worker process left (`BatchError`) and a row that cannot be written (`OutputWriteError`: a full disk) ended with
the error line alone: the rows written before the stop, the calls paid for and the rows that failed were not said,
nor that the same command resumes the batch."""

from __future__ import annotations

import contextlib
import json

import pytest

from graph.cli import app
from tests.cli_agent_helpers import _scripted, runner
from tests.test_batch_output_faults import _full_after


def _ends_with_the_summary_then(text: str, error: str) -> None:
    """The closing line comes before `error`, and the resume hint after it."""
    assert "Traceback" not in text, text
    summary, said = text.find("scored=1 zero=0 ineligible=1  usage: calls="), text.find(error)
    assert 0 <= summary < said, text
    assert "  ineligible (input): 1, first: manifest: input:" in text[summary:said], text
    assert "the same command resumes the batch" in text[said:], text


def _batch_with_a_bad_line(tmp_path):  # noqa: ANN202
    """Two clips and a bad line (no instruction: an ineligible row written before any run)."""
    from tests.graph_scripts import square_batch

    manifest = square_batch(tmp_path, 2, name="m.jsonl")
    with manifest.open("a") as fh:
        fh.write(json.dumps({"path": "c0.mp4"}) + "\n")
    return manifest, tmp_path / "o.jsonl"


def test_a_full_disk_mid_run_ends_with_the_summary_of_the_rows_written(monkeypatch, tmp_path):
    pytest.importorskip("graph.builder")
    _scripted(monkeypatch, tmp_path)
    manifest, out = _batch_with_a_bad_line(tmp_path)
    _full_after(monkeypatch, 2)  # the bad line's row and one clip's, then the disk is full
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--concurrency", "1",
                              "--preset", "visual_verify"])
    assert res.exit_code == 2, res.output
    _ends_with_the_summary_then(res.stderr, f"error: cannot write --out {out}: No space left on device")
    assert len(out.read_text().splitlines()) == 2


def test_no_worker_left_mid_run_ends_with_the_summary_of_the_rows_written(monkeypatch, tmp_path):
    from graph import batch_procs
    from graph.batch import result_line
    from graph.schemas import RewardResult

    def dies(items, writer, **_kwargs):  # noqa: ANN001, ANN003, ANN202 - one row, then every worker is gone
        writer.write(result_line(items[0], RewardResult(status="scored", reward=1.0, preset="direct", run_id="r",
                                                        usage={"calls": 3})), "scored")
        raise batch_procs.BatchError("no batch worker process is left and no more may start")

    _scripted(monkeypatch, tmp_path)
    monkeypatch.setattr(batch_procs, "run_batch_processes", dies)
    manifest, out = _batch_with_a_bad_line(tmp_path)
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--processes", "2",
                              "--preset", "direct"])
    assert res.exit_code == 2, res.output
    _ends_with_the_summary_then(res.stderr, "error: no batch worker process is left and no more may start")
    assert "usage: calls=3" in res.stderr, res.stderr
    assert len(out.read_text().splitlines()) == 2


def test_a_trace_database_that_cannot_open_ends_with_the_summary_of_the_rows_written(monkeypatch, tmp_path):
    """The in-process batch opens its trace database once the bad lines' rows are written: one it cannot use
    (`graph.stores.StoreError`) ended the command with its error line alone, though those rows were written."""
    _scripted(monkeypatch, tmp_path)
    manifest, out = _batch_with_a_bad_line(tmp_path)
    traces = tmp_path / "traces.sqlite"
    traces.write_text("not a database, a text file of the same name\n" * 100)
    monkeypatch.setenv("RAA_TRACES_PATH", str(traces))
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"])
    assert res.exit_code == 2, res.output
    text = res.stderr
    summary, said = text.find("scored=0 zero=0 ineligible=1"), text.find("error: ")
    assert 0 <= summary < said and "trace database" in text[said:], text
    assert "  ineligible (input): 1, first: manifest: input:" in text[summary:said], text
    assert "the same command resumes the batch" in text[said:], text
    assert len(out.read_text().splitlines()) == 1  # the bad line's row


def test_a_ctrl_c_then_a_full_disk_says_both_and_exits_2(monkeypatch, tmp_path):
    """A Ctrl-C, then a full disk while the rows the workers had sent were written (`graph.batch_pipes.drain`): the
    batch ended as on a full disk alone ("stopped: ...", exit 2), the Ctrl-C not said. Both are said now; the exit
    status stays 2, the write error's (`graph.batch_ending.stopped`: the resume fails until it is fixed)."""
    from graph import batch_output, batch_procs
    from graph.batch import result_line
    from graph.schemas import RewardResult

    def row(item):  # noqa: ANN001, ANN202
        return result_line(item, RewardResult(status="scored", reward=1.0, preset="direct", run_id="r",
                                              usage={"calls": 1}))

    def interrupted(items, writer, **_kwargs):  # noqa: ANN001, ANN003, ANN202 - one row, Ctrl-C, the drain's row fails
        writer.write(row(items[0]), "scored")
        with contextlib.suppress(batch_output.OutputWriteError):  # as run_batch_processes: on `writer.failed`
            writer.write(row(items[1]), "scored")
        raise KeyboardInterrupt

    _scripted(monkeypatch, tmp_path)
    monkeypatch.setattr(batch_procs, "run_batch_processes", interrupted)
    manifest, out = _batch_with_a_bad_line(tmp_path)
    _full_after(monkeypatch, 2)  # the bad line's row and the first clip's
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--processes", "2",
                              "--preset", "direct"])
    assert res.exit_code == 2, res.output
    _ends_with_the_summary_then(res.stderr, f"error: cannot write --out {out}: No space left on device")
    text = " ".join(res.stderr.split())
    assert "interrupted (Ctrl-C), and a row could not be written (the error above)" in text, text
    assert "usage: calls=2" in text and "1 finished run(s) whose row could not be written" in text, text
    assert len(out.read_text().splitlines()) == 2
