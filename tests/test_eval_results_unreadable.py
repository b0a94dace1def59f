"""A results.jsonl the user may not read (EACCES at the reopen through /proc/self/fd; root reads every file, so the
refusal is injected as in tests/test_jsonl_read_bytes.py). `raa eval report` told it as a failure to write its pages
("cannot write the report pages in DIR: Permission denied (DIR/results.jsonl)"): its catch-all for OSError is about the
pages it writes. `evals.result_rows.results_found` now names the read: ManifestError "DIR/results.jsonl cannot be
read (Permission denied)", an input error of the report (exit 2, one line)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import evals.eval_cli as eval_cli
from evals.result_rows import REWARD_ADVICE, ManifestError, results_lines
from tests.path_calls import reopen_refused


@pytest.fixture
def refused(monkeypatch):
    """os.open refuses the reopen of a regular file for reading (a file the user may not read)."""
    reopen_refused(monkeypatch)


def test_an_unreadable_results_file_is_named_as_a_read(tmp_path, refused):
    results = tmp_path / "results.jsonl"
    results.write_text('{"path": "/a.mp4", "preset": "direct"}\n')
    with pytest.raises(ManifestError, match=rf"^{results} cannot be read \(Permission denied\)$"):
        results_lines(results, REWARD_ADVICE)


def test_raa_eval_report_says_it_cannot_read_results_not_that_it_cannot_write(tmp_path, refused):
    results = tmp_path / "results.jsonl"
    results.write_text('{"path": "/a.mp4", "preset": "direct"}\n')
    res = CliRunner().invoke(eval_cli.eval_app, ["report", str(tmp_path), "--traces", str(tmp_path / "none.sqlite")])
    assert res.exit_code == 2, res.output
    assert f"{results} cannot be read (Permission denied)" in res.output
    assert "cannot write" not in res.output
