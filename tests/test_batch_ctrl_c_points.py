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


def _cut_closing_lines(monkeypatch) -> None:  # noqa: ANN001
    """The closing lines say their first line, then a Ctrl-C comes."""
    import typer

    from graph import batch_ending

    def cut(writer, out):  # noqa: ANN001, ANN202
        typer.echo(" ".join(f"{k}={v}" for k, v in writer.counts.items()), err=True)
        raise KeyboardInterrupt

    monkeypatch.setattr(batch_ending, "closing_lines", cut)


def test_a_ctrl_c_in_the_closing_lines_of_a_batch_that_ran_says_every_row_is_written(monkeypatch, tmp_path):
    """It ended with a KeyboardInterrupt traceback, though every row was written: now the usual interrupted line, saying
    what the output holds, exit 130."""
    from graph.cli import app
    from tests.cli_agent_helpers import _scripted, runner
    from tests.graph_scripts import square_batch

    _scripted(monkeypatch, tmp_path)
    manifest, out = square_batch(tmp_path, 2, name="m.jsonl"), tmp_path / "o.jsonl"
    _cut_closing_lines(monkeypatch)
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"])
    assert res.exit_code == 130 and not isinstance(res.exception, KeyboardInterrupt), res.output
    assert f"interrupted as the batch ended: every row of this run is in {out}" in " ".join(res.stderr.split()), \
        res.stderr
    assert len(out.read_text().splitlines()) == 2


def test_a_ctrl_c_in_the_closing_lines_of_a_stopped_batch_still_says_how_to_resume(monkeypatch, tmp_path):
    """A second Ctrl-C as a stopped batch said its closing lines (a researcher pressing it twice): a traceback, and the
    lines saying that the unscored clips got no row and that the same command resumes were never said."""
    from graph import batch
    from graph.cli import app
    from tests.cli_agent_helpers import _scripted, runner
    from tests.graph_scripts import square_batch

    async def interrupted(*args):  # noqa: ANN002, ANN202 - Ctrl-C in the runs, before any row is written
        raise KeyboardInterrupt

    _scripted(monkeypatch, tmp_path)
    monkeypatch.setattr(batch, "run_batch", interrupted)
    manifest, out = square_batch(tmp_path, 2, name="m.jsonl"), tmp_path / "o.jsonl"
    _cut_closing_lines(monkeypatch)
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"])
    assert res.exit_code == 130 and not isinstance(res.exception, KeyboardInterrupt), res.output
    assert "the same command resumes the batch" in res.stderr, res.stderr


@pytest.mark.parametrize("renamed", [True, False])
def test_a_ctrl_c_as_the_old_copies_go_says_whether_they_went(monkeypatch, tmp_path, renamed):
    """A Ctrl-C after the rewrite without other manifests' old copies was renamed into place (before
    `write_text_atomic` returned) said they stay beside the new ones: the file holds one row per key. Before the
    rename, they do stay."""
    from graph import batch_repeat_rows
    from tests.cli_agent_helpers import _scripted
    from tests.test_batch_manifest_lines import _rows
    from tests.test_batch_repeat_rows_interrupt import _run
    from tests.test_batch_repeat_rows_shared import first_row_deleted

    _scripted(monkeypatch, tmp_path)
    monkeypatch.setenv("RAA_CACHE_PATH", "off")
    out, a, b = first_row_deleted(tmp_path)
    real = batch_repeat_rows.write_text_atomic

    def ctrl_c(path, text):  # noqa: ANN001, ANN202
        if renamed:
            real(path, text)
        raise KeyboardInterrupt

    monkeypatch.setattr(batch_repeat_rows, "write_text_atomic", ctrl_c)
    said = " ".join(_run(a, out, code=130).split())
    ids = sorted(r["manifest"]["id"] for r in _rows(out))
    if renamed:
        assert ids == ["a1", "a2", "b2"], _rows(out)  # one row per key
        assert "stay beside" not in said and "they were removed (one row per key)" in said, said
    else:
        assert ids == ["a1", "a2", "b2", "b2"], _rows(out)  # the old copy, then the new
        assert "they stay beside the new ones" in said and "were removed" not in said, said
    assert said.index("scored=") > said.index("interrupted while removing"), said


def _ctrl_c_pressed_again_in_the_append(monkeypatch) -> list[int]:  # noqa: ANN001
    """`append_line` does not return (a hung mount; a terminal paused with Ctrl-S under the progress bar) while the
    researcher presses Ctrl-C three times: the Ctrl-Cs that it took, in order, are in the list returned."""
    taken: list[int] = []

    def append(path, line):  # noqa: ANN001, ANN202
        for n in range(3):
            signal.raise_signal(signal.SIGINT)
            taken.append(n)

    monkeypatch.setattr(batch_output, "append_line", append)
    return taken


def test_a_second_ctrl_c_while_a_row_is_held_stops_the_write(monkeypatch, tmp_path, ctrl_c_raises):
    """Every Ctrl-C was held until the write returned: a write that hangs could not be stopped by Ctrl-C at all. The
    first is held; the second passes on at once (a KeyboardInterrupt there), and the handler is Python's again."""
    writer = batch_output.RowWriter(tmp_path / "out.jsonl")
    taken = _ctrl_c_pressed_again_in_the_append(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        writer.write(_row("a"), "scored")
    assert taken == [0], taken
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_second_ctrl_c_while_a_repeat_row_is_held_stops_the_write(monkeypatch, tmp_path, ctrl_c_raises):
    """The same in a repeat line's row, written with the row it copies (a hold inside the row's hold)."""
    from graph import batch_output as bo

    out = tmp_path / "out.jsonl"
    writer = bo.RowWriter(out)
    writer.follow("a", {"key": "a-2", "repeat_of": "a"})
    real, taken, calls = bo.append_line, [], []

    def append(path, line):  # noqa: ANN001, ANN202 - the row goes; its repeat hangs under three Ctrl-Cs
        calls.append(line)
        if len(calls) == 1:
            return real(path, line)
        for n in range(3):
            signal.raise_signal(signal.SIGINT)
            taken.append(n)
        return None

    monkeypatch.setattr(bo, "append_line", append)
    with pytest.raises(KeyboardInterrupt):
        writer.write(_row("a"), "scored")
    assert taken == [0] and len(calls) == 2, (taken, calls)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_two_ctrl_cs_while_a_row_is_held_in_an_in_process_batch_stop_it_as_before(monkeypatch, tmp_path,
                                                                                   ctrl_c_raises):
    """Under asyncio's own SIGINT handler (an in-process batch: the first Ctrl-C cancels the main task, the second
    raises KeyboardInterrupt) two Ctrl-Cs in one held write were one: the batch was only cancelled, and a write that
    hangs went on. Now the second raises KeyboardInterrupt where it comes, as it did before rows were held."""
    import asyncio

    writer = batch_output.RowWriter(tmp_path / "out.jsonl")
    taken = _ctrl_c_pressed_again_in_the_append(monkeypatch)

    async def main() -> None:
        writer.write(_row("a"), "scored")

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(main())
    assert taken == [0], taken
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_second_ctrl_c_as_an_interrupted_removal_of_old_copies_is_told_ends_as_the_first(monkeypatch, tmp_path,
                                                                                           ctrl_c_raises):
    """A Ctrl-C as other manifests' old copies went, and another while `drop_replaced_copies` told whether the rewrite
    happened (its `file_stamp`): the second escaped as a bare KeyboardInterrupt, the closing lines unsaid. Now it is
    held until that line is said, then taken as the first: closing lines, exit 130."""
    from graph import batch, batch_repeat_rows
    from tests.cli_agent_helpers import _scripted
    from tests.test_batch_manifest_lines import _rows
    from tests.test_batch_repeat_rows_shared import first_row_deleted

    _scripted(monkeypatch, tmp_path)
    monkeypatch.setenv("RAA_CACHE_PATH", "off")
    out, a, b = first_row_deleted(tmp_path)
    real_stamp, first = batch.file_stamp, []

    def ctrl_c(path, text):  # noqa: ANN001, ANN202
        first.append(path)
        raise KeyboardInterrupt

    def stamp_pressed_again(path):  # noqa: ANN001, ANN202 - the stamp the interrupt branch takes: pressed again
        if first:
            signal.raise_signal(signal.SIGINT)
        return real_stamp(path)

    monkeypatch.setattr(batch_repeat_rows, "write_text_atomic", ctrl_c)
    monkeypatch.setattr(batch, "file_stamp", stamp_pressed_again)
    from graph.cli import app
    from tests.cli_agent_helpers import runner

    res = runner.invoke(app, ["score-batch", str(a), "--out", str(out), "--preset", "decomposed"])
    assert res.exit_code == 130 and not isinstance(res.exception, KeyboardInterrupt), res.output
    said = " ".join(res.stderr.split())
    assert "interrupted while removing" in said and said.index("scored=") > said.index("interrupted while"), said
    assert sorted(r["manifest"]["id"] for r in _rows(out)) == ["a1", "a2", "b2", "b2"], _rows(out)  # none lost


def test_a_ctrl_c_as_the_closing_lines_end_says_every_row_is_written(monkeypatch, tmp_path, ctrl_c_raises):
    """A Ctrl-C once the closing lines were said, before the check after them: a bare KeyboardInterrupt. Now said as
    one in them: every row is in the output, exit 130."""
    from graph import batch_command
    from graph.cli import app
    from tests.cli_agent_helpers import _scripted, runner
    from tests.graph_scripts import square_batch

    _scripted(monkeypatch, tmp_path)
    manifest, out = square_batch(tmp_path, 2, name="m.jsonl"), tmp_path / "o.jsonl"
    real = batch_command.closing_lines_cut

    def then_ctrl_c(writer, path):  # noqa: ANN001, ANN202
        cut = real(writer, path)
        signal.raise_signal(signal.SIGINT)
        return cut

    monkeypatch.setattr(batch_command, "closing_lines_cut", then_ctrl_c)
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"])
    assert res.exit_code == 130 and not isinstance(res.exception, KeyboardInterrupt), res.output
    said = " ".join(res.stderr.split())
    assert "scored=2" in said and f"interrupted as the batch ended: every row of this run is in {out}" in said, said
    assert len(out.read_text().splitlines()) == 2
