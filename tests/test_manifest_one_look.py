"""`raa eval reward`'s manifest (`evals.manifest_rows.manifest_lines`) and a VQA manifest (`evals.vqa.read_vqa_manifest`)
are taken from one look (`tools.file_kinds.read_at`): each asked `missing_file` (a stat), then read the file by name.
Removed in between, the read's bare FileNotFoundError escaped where a missing manifest is the command's error,
"manifest not found: PATH"."""

from __future__ import annotations

import json

import pytest

from evals.manifest_rows import ManifestError, manifest_lines
from evals.vqa import VQAManifestError, read_vqa_manifest
from tests.path_calls import removed_after_first_look


@pytest.mark.parametrize("looks", [1, 2])
def test_a_manifest_removed_after_the_first_look_is_read_whole_or_not_found(tmp_path, monkeypatch, looks):
    """The first look asks whether the path is a folder (`Path.is_dir`): the file is removed after it or after the
    look that reads it."""
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"path": "a.mp4", "instruction": "push it", "label": "failure"}) + "\n")
    seen = removed_after_first_look(monkeypatch, manifest, looks)
    try:
        lines = manifest_lines(manifest)
    except ManifestError as exc:
        assert str(exc) == f"manifest not found: {manifest}"
    else:
        assert len(seen) >= looks and [row["instruction"] for _, row in lines] == ["push it"], seen
    assert not manifest.exists()


@pytest.mark.parametrize("looks", [1, 2])
def test_a_vqa_manifest_removed_after_the_first_look_is_read_whole_or_not_found(tmp_path, monkeypatch, looks):
    manifest = tmp_path / "q.jsonl"
    manifest.write_text(json.dumps({"path": "a.mp4", "questions": [{"question": "Is it pushed?", "answer": "yes"}]}) + "\n")
    seen = removed_after_first_look(monkeypatch, manifest, looks)
    try:
        items, _ = read_vqa_manifest(manifest)
    except VQAManifestError as exc:
        assert str(exc) == f"manifest not found: {manifest}"
    else:
        assert len(seen) >= looks and len(items) == 1, seen
    assert not manifest.exists()
