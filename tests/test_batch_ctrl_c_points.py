"""Ctrl-C at the exact points of `raa score-batch` where it left the closing counts or messages wrong, each simulated
by patching the step before that point (deterministic: no timing). A real SIGINT is raised where the batch's own
main thread would take it (`signal.raise_signal`, its handler Python's default: KeyboardInterrupt)."""

from __future__ import annotations

import json
import signal

import pytest

from graph import batch_output


@pytest.fixture
def ctrl_c_raises():  # noqa: ANN201 - SIGINT raises KeyboardInterrupt, whatever this test process inherited
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _ctrl_c_after_the_append(monkeypatch) -> None:  # noqa: ANN001
    """`append_line` writes its row, then a Ctrl-C comes before it returns (as it would between the append and the
    count with worker processes, where the parent's main thread takes the KeyboardInterrupt at any point)."""
    real = batch_output.append_line

    def append(path, line):  # noqa: ANN001, ANN202
        real(path, line)
        signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(batch_output, "append_line", append)


def _row(key: str, status: str = "scored") -> str:
    return json.dumps({"key": key, "result": {"status": status, "run_id": f"run-{key}", "usage": {"calls": 2},
                                              "reasons": [] if status != "ineligible" else ["observe: x: y"]}})


def test_a_ctrl_c_between_a_rows_append_and_its_count_counts_the_row_written(monkeypatch, tmp_path, ctrl_c_raises):
    """The row was in the file but not in the closing counts (nor among the runs, nor was its usage paired with a
    row): the closing line said fewer rows than the file held."""
    out = tmp_path / "out.jsonl"
    writer = batch_output.RowWriter(out)
    writer.write(_row("a"), "scored")
    _ctrl_c_after_the_append(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        writer.write(_row("b", "ineligible"), "ineligible")
    assert len(out.read_text().splitlines()) == 2
    assert writer.counts == {"scored": 1, "zero": 0, "ineligible": 1} and writer.runs == 2, writer.counts
    assert writer.usage == {"calls": 4} and writer.unwritten == 0 and list(writer.faults) == ["observe"]


def test_a_ctrl_c_between_a_repeat_rows_append_and_its_count_counts_it(monkeypatch, tmp_path, ctrl_c_raises):
    """The same for a repeat line's row, written with the row it copies (`RowWriter.follow`) or alone."""
    out = tmp_path / "out.jsonl"
    writer = batch_output.RowWriter(out)
    writer.follow("a", {"key": "a-2", "repeat_of": "a"})
    writer.follow("a", {"key": "a-3", "repeat_of": "a"})
    _ctrl_c_after_the_append(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        writer.write(_row("a"), "scored")
    assert writer.counts["scored"] == len(out.read_text().splitlines()), (writer.counts, out.read_text())
    with pytest.raises(KeyboardInterrupt):
        writer.write_repeat(json.loads(_row("a")), {"key": "a-4", "repeat_of": "a"})
    assert writer.counts["scored"] == len(out.read_text().splitlines()), (writer.counts, out.read_text())


def test_a_row_written_outside_the_main_thread_is_written_and_counted(tmp_path):
    """Outside the main thread no SIGINT handler can be set (`signal.signal` raises there): the row goes as before."""
    import threading

    out = tmp_path / "out.jsonl"
    writer = batch_output.RowWriter(out)
    thread = threading.Thread(target=writer.write, args=(_row("a"), "scored"))
    thread.start()
    thread.join()
    assert writer.counts["scored"] == 1 and len(out.read_text().splitlines()) == 1
