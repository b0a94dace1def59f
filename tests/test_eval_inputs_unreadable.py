"""An eval input the user may not read (EACCES at the reopen through /proc/self/fd; root reads every file, so the
refusal is injected as in tests/test_jsonl_read_bytes.py): the manifest of `raa eval reward` (`manifest_lines`) and of
`raa eval world-model` (`read_vqa_manifest`), and the score-batch output of `raa eval draws` / `compare`
(`read_results_file`). Each let the bare PermissionError out (a traceback: their commands print only their own
errors); now `tools.file_kinds.read_or_problem` words it like its other refusals, "manifest PATH cannot be read
(Permission denied)", and each raises its command's error."""

from __future__ import annotations

import pytest

from evals.batch_rows import read_results_file
from evals.manifest_rows import ManifestError, manifest_lines
from evals.vqa import VQAManifestError, read_vqa_manifest
from tests.path_calls import reopen_refused


@pytest.fixture
def refused(monkeypatch):
    """os.open refuses the reopen of a regular file for reading (a file the user may not read)."""
    reopen_refused(monkeypatch)


def test_an_unreadable_eval_manifest_is_the_commands_error(tmp_path, refused):
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("{}\n")
    said = rf"^manifest {manifest} cannot be read \(Permission denied\)$"
    with pytest.raises(ManifestError, match=said):
        manifest_lines(manifest)
    with pytest.raises(VQAManifestError, match=said):
        read_vqa_manifest(manifest)


def test_an_unreadable_results_file_is_the_commands_error(tmp_path, refused):
    results = tmp_path / "out.jsonl"
    results.write_text("{}\n")
    assert read_results_file(results) == (f"results file {results} cannot be read (Permission denied)", b"")
