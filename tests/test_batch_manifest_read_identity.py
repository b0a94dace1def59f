"""The manifest file a run's rows record ("manifest_file_id") is the file whose lines it read: the manifest was
stat'ed, then read by name, so an editor's save by a rename between the two paired the old file's inode with the new
file's lines (rows recording a file that no longer exists, whose inode the system may give another manifest)."""

from __future__ import annotations

import json
import os

from graph.batch_manifest import manifest_items
from graph.batch_manifest_file import file_id


def test_the_recorded_file_is_the_one_read_when_a_save_renames_over_it_meanwhile(monkeypatch, tmp_path):
    """Each look at the manifest by name is followed by an editor's save (a new file, with its own "id", renamed over
    it): whichever save the read finds, the file recorded is that one."""
    manifest = tmp_path / "m.jsonl"
    files: dict[int, dict[str, int]] = {}  # per save: the file it made
    real_stat = os.stat

    def save() -> None:
        n = len(files)
        (tmp_path / "new.jsonl").write_text(json.dumps({"path": "c.mp4", "instruction": "push", "id": n}) + "\n")
        (tmp_path / "new.jsonl").replace(manifest)
        files[n] = file_id(real_stat(manifest))

    save()

    def stat_then_save(path, *args, **kwargs):
        found = real_stat(path, *args, **kwargs)
        if os.fspath(path) == str(manifest):
            save()
        return found

    monkeypatch.setattr(os, "stat", stat_then_save)
    items, _ = manifest_items(manifest, "decomposed")
    monkeypatch.undo()
    assert len(files) > 1, "the manifest was never looked at by name"
    assert items[0]["manifest_file_id"] == files[items[0]["manifest"]["id"]], (items[0], files)
