"""`raa score-batch`'s closing line says what the batch cost: the model usage of every run that finished, its row
written or not. A run whose row could not be written (a full disk) had its usage left out, and so had the runs that
finished after that (rows already in the workers' pipes, read after the failure or after a Ctrl-C): the calls were
made, and paid for, and the resume pays for them again. Its "traces not saved: N of M" counted in M the rows of bad
manifest lines and of repeated lines, which no run wrote and which have no trace."""

from __future__ import annotations

import errno
import json
import re

import pytest

from graph import batch_output
from graph.batch import RowWriter, result_line
from graph.cli import app
from graph.schemas import RewardResult
from tests.cli_agent_helpers import _scripted, runner
from tests.test_batch_output_faults import _full_after

ITEM = {"key": "k0", "line": 1, "path": "/x/c0.mp4", "instruction": "push", "preset": "direct", "draw": 0,
        "manifest": {}}


def _line(key: str = "k0", calls: int = 3, **fields) -> str:  # noqa: ANN003
    result = RewardResult(status="scored", reward=1.0, preset="direct", run_id=key, usage={"calls": calls}, **fields)
    return result_line({**ITEM, "key": key}, result)


def test_a_row_that_cannot_be_written_still_counts_its_runs_usage(monkeypatch, tmp_path):
    out = tmp_path / "o.jsonl"
    writer = RowWriter(out)
    _full_after(monkeypatch, 1)
    writer.write(_line("k0", 1), "scored")
    with pytest.raises(batch_output.OutputWriteError, match="No space left on device"):
        writer.write(_line("k1", 3), "scored")
    writer.write(_line("k2", 5), "scored")  # a run that finished after the failure: counted, not appended
    assert writer.usage["calls"] == 9
    assert writer.counts["scored"] == 1 and writer.unwritten == 2
    assert [json.loads(line)["key"] for line in out.read_text().splitlines()] == ["k0"]


def test_no_row_is_appended_after_one_failed(monkeypatch, tmp_path):
    """A row appended after a failed one (the disk had room again) would follow the torn line it may have left, in the
    middle of the file, where the next run's mend (`tools.jsonl.mend_tail`) does not reach."""
    out = tmp_path / "o.jsonl"
    writer = RowWriter(out)
    real, calls = batch_output.append_line, []

    def once_full(path, line):  # noqa: ANN001, ANN202
        calls.append(line)
        if len(calls) == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, line)

    monkeypatch.setattr(batch_output, "append_line", once_full)
    with pytest.raises(batch_output.OutputWriteError):
        writer.write(_line("k0"), "scored")
    writer.write(_line("k1"), "scored")
    writer.write_repeat(json.loads(_line("k1")), {"key": "k2", "repeat_of": "k1"})
    assert len(calls) == 1 and (not out.exists() or out.read_text() == "")


def test_the_closing_line_counts_the_run_whose_row_the_full_disk_refused(monkeypatch, tmp_path):
    pytest.importorskip("graph.builder")
    from tests.graph_scripts import square_batch

    _scripted(monkeypatch, tmp_path)
    manifest, out = square_batch(tmp_path, 2, name="m.jsonl"), tmp_path / "o.jsonl"
    _full_after(monkeypatch, 1)
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--concurrency", "1",
                              "--preset", "visual_verify"])
    assert res.exit_code == 2, res.output
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    total = re.search(r"usage: calls=(\d+) ", res.stderr)
    assert total and int(total[1]) > row["result"]["usage"]["calls"] > 0, res.stderr  # the second clip's run too
    assert "1 finished run(s) whose row could not be written" in res.stderr, res.stderr


def _three_rows_sent(monkeypatch, tmp_path, full_after: int, then=lambda: None):  # noqa: ANN001, ANN202
    """Three runs of a fake worker (one model call each), every row sent before the parent reads one; the output
    takes `full_after` rows. Returns the writer and the error the batch ended with."""
    from graph import batch_procs
    from graph.settings import BackboneSettings
    from tests.batch_fakes import fake_worker, rows_held_until_taken

    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("RAA_FAKE_DIR", str(marks))
    monkeypatch.setenv("RAA_FAKE_DELAY_S", "0")
    monkeypatch.setattr(batch_procs, "worker_main", fake_worker)
    rows_held_until_taken(monkeypatch, marks, 3, then)
    items = [{**ITEM, "key": f"k{i}", "line": i, "path": f"/x/c{i}.mp4", "error": None} for i in range(3)]
    writer = RowWriter(tmp_path / "out.jsonl")
    _full_after(monkeypatch, full_after)
    with pytest.raises((batch_output.OutputWriteError, KeyboardInterrupt)) as err:
        batch_procs.run_batch_processes(items, writer, settings=BackboneSettings(), preset="direct", processes=1,
                                        concurrency=3)
    return writer, err.value


def test_rows_in_the_pipes_when_a_row_cannot_be_written_are_counted(monkeypatch, tmp_path):
    writer, error = _three_rows_sent(monkeypatch, tmp_path, 0)
    assert isinstance(error, batch_output.OutputWriteError)
    assert writer.usage.get("calls") == 3 and writer.unwritten == 3


def test_rows_drained_after_a_ctrl_c_are_counted_when_the_disk_fills(monkeypatch, tmp_path):
    def ctrl_c() -> None:
        raise KeyboardInterrupt

    writer, error = _three_rows_sent(monkeypatch, tmp_path, 1, ctrl_c)
    assert isinstance(error, KeyboardInterrupt), error  # the batch stopped on the Ctrl-C, and the failure is
    assert writer.failed is not None and "No space left" in str(writer.failed)  # said with it (batch_ending.stopped)
    assert writer.usage.get("calls") == 3 and writer.counts["scored"] == 1 and writer.unwritten == 2


def test_traces_not_saved_counts_among_the_rows_of_runs(tmp_path, capsys):
    """A bad manifest line's row and a repeated line's row have no trace (no run): "1 of 3 row(s)" read as two runs
    whose traces were saved."""
    from graph.batch_ending import closing_lines
    from graph.batch_manifest import bad_line_path

    writer = RowWriter(tmp_path / "o.jsonl")
    bad = {**ITEM, "key": "bad", "line": 2, "path": bad_line_path(2)}
    writer.write(result_line(bad, RewardResult(status="ineligible", preset="direct", reasons=["manifest: input: x"])),
                 "ineligible")
    writer.write(_line("k0", trace_saved=False), "scored")
    writer.write_repeat(json.loads(_line("k0", trace_saved=False)), {"key": "k9", "line": 9, "repeat_of": "k0"})
    closing_lines(writer, tmp_path / "o.jsonl")
    assert "traces not saved: 1 of 1 run(s)" in capsys.readouterr().err


def test_the_row_of_a_clip_whose_worker_died_is_no_run(monkeypatch, tmp_path, capsys):
    """The ineligible row `graph.batch_procs` writes for a clip whose worker died on each attempt has no run id and
    no trace: it counted in "traces not saved: N of M run(s)", and, unwritten on a full disk, among the "finished
    run(s) whose row could not be written", though no run of it finished."""
    from graph.batch_deaths import death_fault
    from graph.batch_ending import closing_lines
    from graph.run_results import fault_result

    def died(key: str) -> str:
        return result_line({**ITEM, "key": key}, fault_result("direct", death_fault(["died (signal 9)"] * 2)))

    out = tmp_path / "o.jsonl"
    writer = RowWriter(out)
    writer.write(died("d0"), "ineligible")
    writer.write(_line("k0", trace_saved=False), "scored")
    _full_after(monkeypatch, 0)
    with pytest.raises(batch_output.OutputWriteError):
        writer.write(died("d1"), "ineligible")
    closing_lines(writer, out)
    err = " ".join(capsys.readouterr().err.split())
    assert "traces not saved: 1 of 1 run(s)" in err, err
    assert writer.unwritten == 0 and "finished run(s) whose row could not be written" not in err, err
