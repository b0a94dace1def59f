"""An evaluation folder's run records (evals/eval_runs.py) that cannot be read. summary.json that is a folder, not
UTF-8 or not JSON was read as no summary: the run it records was then called unfinished ("has not finished ...
rerun it"), a claim about a file never read. A FIFO of either name (or of results.jsonl's) blocked `raa eval report`
forever, opening it for a writer that never comes. Each is now refused, naming the file and why: summary.json by
`raa eval report`'s one read of it (`evals.report_index.read_summary`, `SummaryError`), started.json by
`evals.eval_runs.started_run` (`RunRecordError`)."""

from __future__ import annotations

import json

import pytest

from evals.eval_runs import STARTED, SUMMARY, RunRecordError, started_run
from evals.report_index import SummaryError, write_eval_index
from tests.fifo_files import call_unblocked, make_fifo
from tests.unfinished_runs import unfinished_run

RECORD = {"run": "r1", "manifest": "/m.jsonl", "presets": ["full"], "clips": 1, "started": "2026-01-01T00:00:00+00:00"}


def _folder(path):
    path.mkdir()


def _not_utf8(path):
    path.write_bytes(json.dumps({**RECORD, "finished": "x"}).encode().replace(b"/m.jsonl", b"/caf\xe9.jsonl"))


def _not_json(path):
    path.write_text('{"run": "r1", ')


@pytest.mark.parametrize("make, why", [
    (_folder, r"cannot be read \(Is a directory\)"),
    (make_fifo, r"cannot be read \(not a regular file: a FIFO\)"),
    (_not_utf8, r"not UTF-8 text \(byte 0xe9"),
    (_not_json, r"not valid JSON"),
], ids=["folder", "fifo", "not_utf8", "not_json"])
def test_a_summary_that_cannot_be_read_is_named_not_taken_for_an_unfinished_run(tmp_path, make, why):
    (tmp_path / "results.jsonl").write_text(json.dumps({"path": "/a.mp4", "preset": "full"}) + "\n")
    (tmp_path / STARTED).write_text(json.dumps(RECORD))
    make(tmp_path / SUMMARY)
    warnings = []
    with pytest.raises(SummaryError, match=rf"{tmp_path / SUMMARY} .*{why}"):
        call_unblocked(lambda: write_eval_index(tmp_path, traces_path=tmp_path / "none.sqlite",
                                                on_unfinished=warnings.append), tmp_path / SUMMARY)
    assert warnings == []  # no "has not finished" of a run whose summary was never read
    assert not (tmp_path / "index.html").exists()


@pytest.mark.parametrize("make, why", [
    (_folder, r"cannot be read \(Is a directory\)"),
    (make_fifo, r"cannot be read \(not a regular file: a FIFO\)"),
], ids=["folder", "fifo"])
def test_a_started_record_that_cannot_be_opened_is_named(tmp_path, make, why):
    """A started.json that is no file (a folder, a FIFO) is no hand edit (those stay no record, module docstring)."""
    make(tmp_path / STARTED)
    with pytest.raises(RunRecordError, match=rf"{tmp_path / STARTED} {why}"):
        call_unblocked(lambda: started_run(tmp_path), tmp_path / STARTED)


def test_records_that_read_keep_their_answers(tmp_path):
    """The refusals above are of unreadable files only: a finished run, an unfinished one, and a hand-edited
    started.json (no record, as documented) answer as before."""
    (tmp_path / STARTED).write_text(json.dumps(RECORD))
    assert unfinished_run(tmp_path)["run"] == "r1"  # no summary.json: not finished
    (tmp_path / SUMMARY).write_text(json.dumps({**RECORD, "finished": "2026-01-01T00:01:00+00:00"}))
    assert unfinished_run(tmp_path) is None
    (tmp_path / STARTED).write_text('{"run": ')
    assert unfinished_run(tmp_path) is None


def test_the_report_refuses_a_fifo_summary_naming_it(tmp_path):
    """`raa eval report`'s own read of summary.json (`read_summary`) waited on the FIFO without end."""
    (tmp_path / "results.jsonl").write_text(json.dumps({"path": "/a.mp4", "preset": "full"}) + "\n")
    make_fifo(tmp_path / SUMMARY)
    with pytest.raises(SummaryError, match=rf"{tmp_path / SUMMARY} cannot be read \(not a regular file: a FIFO\)"):
        call_unblocked(lambda: write_eval_index(tmp_path), tmp_path / SUMMARY)


def test_the_report_command_names_a_started_record_that_is_a_folder(tmp_path):
    """`raa eval report`: one error line naming the file, exit 2, nothing written (the page said nothing of it)."""
    from typer.testing import CliRunner

    from evals import eval_cli

    ev = tmp_path / "ev"
    ev.mkdir()
    row = {"path": str(tmp_path / "a.mp4"), "preset": "full", "label": "failure", "reward": 0.9, "status": "scored"}
    (ev / "results.jsonl").write_text(json.dumps(row) + "\n")
    (ev / STARTED).mkdir()
    result = CliRunner().invoke(eval_cli.eval_app, ["report", str(ev), "--traces", str(tmp_path / "none.sqlite")])
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert f"{ev / STARTED} cannot be read (Is a directory)" in " ".join(result.output.split()), result.output
    assert not (ev / "index.html").exists()
