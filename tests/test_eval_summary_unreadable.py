"""A summary.json that exists but cannot be read (a folder of that name, no read permission) ended `raa eval
report` in a traceback (PermissionError) or, for a folder, was taken for no summary at all and every row of
results.jsonl indexed; now one error line naming the file (`evals.report_index.SummaryError`, exit 2)."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

import evals.eval_cli as eval_cli
from evals.report_index import SummaryError, read_summary, scope_of

runner = CliRunner()


def _folder(tmp_path):
    ev = tmp_path / "ev"
    ev.mkdir()
    row = {"path": str(tmp_path / "a.mp4"), "preset": "full", "label": "failure", "reward": 0.9, "status": "scored"}
    (ev / "results.jsonl").write_text(json.dumps(row) + "\n")
    return ev


def test_a_summary_that_is_a_folder_is_named(tmp_path):
    ev = _folder(tmp_path)
    (ev / "summary.json").mkdir()
    with pytest.raises(SummaryError, match=r"summary\.json cannot be read"):
        read_summary(ev / "summary.json")
    result = runner.invoke(eval_cli.eval_app, ["report", str(ev), "--traces", str(tmp_path / "none.sqlite")])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert f"{ev / 'summary.json'} cannot be read" in result.output, result.output
    assert not (ev / "index.html").exists()


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads a file whatever its permissions")
def test_a_summary_without_read_permission_is_named(tmp_path):
    ev = _folder(tmp_path)
    summary = ev / "summary.json"
    summary.write_text('{"presets": ["full"], "paths": []}')
    summary.chmod(0)
    try:
        result = runner.invoke(eval_cli.eval_app, ["report", str(ev), "--traces", str(tmp_path / "none.sqlite")])
    finally:
        summary.chmod(0o644)
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert f"{summary} cannot be read" in result.output, result.output


def test_a_summary_that_raises_on_reading_is_named(tmp_path, monkeypatch):
    """The permission case where the tests run as root (which reads any file): the reader's OSError itself."""
    import evals.report_index

    def refused(path):
        raise PermissionError(13, "Permission denied", str(path))

    summary = _folder(tmp_path) / "summary.json"
    summary.write_text("{}")
    monkeypatch.setattr(evals.report_index, "parsed_file", refused)
    with pytest.raises(SummaryError, match=rf"{summary} cannot be read \(Permission denied\)"):
        read_summary(summary)


def test_a_missing_summary_is_still_no_scope(tmp_path):
    summary = _folder(tmp_path) / "summary.json"
    assert read_summary(summary) is None
    assert scope_of(read_summary(summary), summary) is None
