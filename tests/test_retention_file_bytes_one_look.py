"""`graph.retention.file_bytes` (the sizes `raa prune` prints) asked `Path.exists` of the database and of its
write-ahead log, then stat'ed each by name: SQLite deletes the -wal file when its last connection closes (a batch that
ends), and one removed between the two looks raised a bare FileNotFoundError. A file not there counts 0 bytes."""

from __future__ import annotations

from graph.retention import file_bytes
from tests.path_calls import removed_after_first_look


def test_a_wal_removed_after_its_look_counts_nothing(tmp_path, monkeypatch):
    db = tmp_path / "traces.sqlite"
    db.write_bytes(b"d" * 100)
    wal = tmp_path / "traces.sqlite-wal"
    wal.write_bytes(b"w" * 10)
    seen = removed_after_first_look(monkeypatch, wal)
    size = file_bytes(db)
    monkeypatch.undo()
    assert seen and not wal.exists()
    assert size in (100, 110), size
