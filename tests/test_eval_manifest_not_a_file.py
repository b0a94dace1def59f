"""A clip-suite or VQA manifest path that names no regular file (a FIFO, such as ``-m <(...)``, a folder where a
folder's manifest.jsonl should be): it was "manifest not found", for a path that is there (`is_file` is false for
both). It is now refused naming what is there, and the FIFO is never opened: opening its read end releases a writer
blocked opening the other end, which then fails with a broken pipe."""

from __future__ import annotations

import os

import pytest

from evals.manifest_rows import ManifestError, load_manifest
from evals.vqa import VQAManifestError, read_vqa_manifest
from tests.fifo_files import call_unblocked, make_fifo

READERS = [(load_manifest, ManifestError), (read_vqa_manifest, VQAManifestError)]


@pytest.fixture
def never_opened(monkeypatch):
    """The paths given here may be looked at (a stat, or an O_PATH handle, which opens neither end of a FIFO:
    `tools.file_kinds.read_at`) but not opened."""
    guarded: list[str] = []
    real_open = os.open

    def guarded_open(path, flags, *args, **kwargs):
        assert os.fspath(path) not in guarded or flags & os.O_PATH, f"{path} was opened"
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", guarded_open)
    return guarded


@pytest.mark.parametrize("read, error", READERS, ids=["clipsuite", "vqa"])
def test_a_fifo_manifest_is_named_as_one_and_never_opened(tmp_path, never_opened, read, error):
    fifo = tmp_path / "m.jsonl"
    make_fifo(fifo)
    never_opened.append(str(fifo))
    with pytest.raises(error, match=rf"^manifest {fifo} is a FIFO, not a regular file: write the manifest to a file"):
        call_unblocked(lambda: read(fifo), fifo)


@pytest.mark.parametrize("read, error", READERS, ids=["clipsuite", "vqa"])
def test_a_folders_manifest_that_is_a_folder_is_named_as_one(tmp_path, read, error):
    (tmp_path / "manifest.jsonl").mkdir()
    with pytest.raises(error, match=rf"^manifest {tmp_path / 'manifest.jsonl'} is a folder, not a regular file"):
        read(tmp_path)


@pytest.mark.parametrize("read, error", READERS, ids=["clipsuite", "vqa"])
def test_a_missing_manifest_is_still_not_found(tmp_path, read, error):
    with pytest.raises(error, match=rf"^manifest not found: {tmp_path / 'none.jsonl'}$"):
        read(tmp_path / "none.jsonl")
    (tmp_path / "dangling.jsonl").symlink_to(tmp_path / "gone.jsonl")
    with pytest.raises(error, match=rf"^manifest not found: {tmp_path / 'dangling.jsonl'}$"):
        read(tmp_path / "dangling.jsonl")
