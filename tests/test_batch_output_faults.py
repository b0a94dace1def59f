"""A write to `--out` that fails (disk full, a read-only file) stopped `raa score-batch` with a traceback; it is one
error line naming the file and the problem, exit 2, and the rows written before stay (the resume scores the rest).
The failure is injected by replacing the row append (`graph.batch_output.append_line`): the tests run as root,
so permissions cannot make it."""

from __future__ import annotations

import errno
import json

import pytest

from graph import batch_output
from graph.cli import app
from tests.cli_agent_helpers import _scripted, runner


def _full_after(monkeypatch, rows: int) -> None:
    """`append_line` writes `rows` rows, then fails as a full disk does."""
    real, calls = batch_output.append_line, []

    def append(path, line):  # noqa: ANN001, ANN202
        calls.append(line)
        if len(calls) > rows:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, line)

    monkeypatch.setattr(batch_output, "append_line", append)


def test_a_full_disk_is_one_error_line_naming_the_output_and_rows_written_stay(monkeypatch, tmp_path):
    pytest.importorskip("graph.builder")
    from tests.graph_scripts import square_batch

    _scripted(monkeypatch, tmp_path)
    manifest = square_batch(tmp_path, 3, name="m.jsonl")
    out = tmp_path / "o.jsonl"
    _full_after(monkeypatch, 1)
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--concurrency", "1",
                              "--preset", "visual_verify"])
    assert res.exit_code == 2, res.output
    assert not isinstance(res.exception, OSError) and "Traceback" not in res.output
    assert f"error: cannot write --out {out}" in res.output and "No space left on device" in res.output, res.output
    assert len(out.read_text().splitlines()) == 1  # the row written before the disk filled stays


def test_a_full_disk_under_worker_processes_is_an_output_error(monkeypatch, tmp_path):
    from graph import batch_procs
    from graph.batch import RowWriter
    from graph.settings import BackboneSettings
    from tests.batch_fakes import fake_worker

    monkeypatch.setattr(batch_procs, "worker_main", fake_worker)
    monkeypatch.setattr("tests.batch_fakes.DELAY_S", 0.1)
    items = [{"key": f"k{i}", "line": i, "path": f"/x/c{i}.mp4", "written": f"c{i}.mp4", "instruction": "push",
              "preset": "direct", "draw": 0, "manifest": {}, "error": None} for i in range(2)]
    out = tmp_path / "out.jsonl"
    _full_after(monkeypatch, 0)
    with pytest.raises(batch_output.OutputWriteError, match="No space left on device") as err:
        batch_procs.run_batch_processes(items, RowWriter(out), settings=BackboneSettings(), preset="direct",
                                        processes=1, concurrency=2)
    assert str(out) in str(err.value)


def _disk_full(*_args, **_kwargs):  # noqa: ANN002, ANN003, ANN202
    raise OSError(errno.ENOSPC, "No space left on device")


def _bad_line_batch(monkeypatch, tmp_path):  # noqa: ANN202
    """A manifest of one bad line (no instruction: a row, no model call), scored once into its output."""
    _scripted(monkeypatch, tmp_path)
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"path": "missing.mp4"}) + "\n")
    out = tmp_path / "o.jsonl"
    args = ["score-batch", str(manifest), "--out", str(out), "--preset", "direct"]
    assert runner.invoke(app, args).exit_code == 0
    return out, args


@pytest.mark.parametrize("step", ["mkdir", "mend_tail"])
def test_a_writer_that_cannot_prepare_the_output_is_an_output_error_and_the_file_is_left_as_it_was(
        monkeypatch, tmp_path, step):
    out = tmp_path / "o.jsonl"
    out.write_text('{"key": "a"}\n{"key": "b", "torn')
    if step == "mkdir":
        monkeypatch.setattr(batch_output.Path, "mkdir", _disk_full)
    else:
        monkeypatch.setattr(batch_output, "mend_tail", _disk_full)
    with pytest.raises(batch_output.OutputWriteError) as err:
        batch_output.RowWriter(out)
    text = str(err.value)
    assert str(out) in text and "No space left on device" in text and "left as it was" in text, text
    assert out.read_text() == '{"key": "a"}\n{"key": "b", "torn'


def test_a_failed_rewrite_of_the_rows_to_score_again_is_an_output_error_and_no_row_is_removed(monkeypatch, tmp_path):
    from graph import batch_resume

    out = tmp_path / "o.jsonl"
    out.write_text('{"key": "a"}\n{"key": "b"}\n')
    monkeypatch.setattr(batch_resume, "write_text_atomic", _disk_full)
    with pytest.raises(batch_output.OutputWriteError) as err:
        batch_resume.drop_rows(batch_output.read_output(out), lambda row: "retry" if row["key"] == "b" else None)
    text = str(err.value)
    assert str(out) in text and "No space left on device" in text and "no row removed" in text, text
    assert out.read_text() == '{"key": "a"}\n{"key": "b"}\n'


@pytest.mark.parametrize("where", ["graph.batch_resume.write_text_atomic", "graph.batch_output.mend_tail"])
def test_score_batch_that_cannot_rewrite_or_prepare_its_output_says_so_in_one_line(monkeypatch, tmp_path, where):
    out, args = _bad_line_batch(monkeypatch, tmp_path)  # the rerun rewrites the bad line's row (drop_rows)
    before = out.read_text()
    monkeypatch.setattr(where, _disk_full)
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert not isinstance(res.exception, OSError) and "Traceback" not in res.output
    assert f"error: cannot rewrite --out {out}" in res.output or f"error: cannot prepare --out {out}" in res.output
    assert "No space left on device" in res.output, res.output
    assert out.read_text() == before
