"""`graph.stores.connect_wal(create=False)` (SQLite's ``mode=rw`` through a file: URI), as the prune command's
`graph.retention.stage_cache_entries` opens the stage cache: a file not there is not made, and every stage cache
that is there opens as it did by its plain name: a name with a URI's special characters (``?``, ``#``, ``%``, a
space; unquoted, ``?`` ends the path and ``#`` starts a fragment), a relative name, a file written without WAL (it
is switched to WAL, as the plain open did), a read-only file, and ":memory:" (in memory, as connect_wal's
docstring says, not a file of that name in the working directory)."""

from __future__ import annotations

import os
import sqlite3

import pytest

from graph.cache import StageCache
from graph.retention import stage_cache_entries
from graph.stores import CACHE_TABLES, connect_wal

ODD = ["a?b", "c#d", "e%20f", "g%", "h i", "j?k#l%41 m"]


def _cache(path) -> None:
    cache = StageCache(path)
    for key in ("k1", "k2", "k3"):
        cache.put(key, "v")
    cache.close()


@pytest.mark.parametrize("name", ODD)
def test_a_stage_cache_under_a_name_with_uri_characters_is_counted_and_pruned(tmp_path, name):
    folder = tmp_path / name
    folder.mkdir()
    path = folder / f"{name}.sqlite"
    _cache(path)
    before = sorted(os.listdir(tmp_path))
    assert stage_cache_entries(path) == (3, 3)
    assert stage_cache_entries(path, delete=True) == (3, 3)
    assert stage_cache_entries(path) == (0, 0)
    assert sorted(os.listdir(tmp_path)) == before  # nothing made beside it under a cut-off name
    assert set(os.listdir(folder)) <= {path.name, f"{path.name}-wal", f"{path.name}-shm"}


@pytest.mark.parametrize("name", ODD)
def test_no_file_under_a_name_with_uri_characters_is_made(tmp_path, name):
    path = tmp_path / name / "none.sqlite"
    path.parent.mkdir()
    assert stage_cache_entries(path) == (0, 0)
    assert os.listdir(path.parent) == [] and sorted(os.listdir(tmp_path)) == [name]


def test_a_relative_name_opens_the_file_of_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _cache("c?1.sqlite")
    assert stage_cache_entries("c?1.sqlite") == (3, 3)


def test_a_file_written_without_wal_is_switched_to_wal_and_a_read_only_one_is_read(tmp_path):
    path = tmp_path / "plain.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE stage_cache (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL)")
    conn.execute("INSERT INTO stage_cache VALUES ('a', 'b', 1.0)")
    conn.commit()
    conn.close()
    wal = connect_wal(path, "stage cache", CACHE_TABLES, create=False)
    assert wal.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    wal.close()
    path.chmod(0o444)
    try:
        assert stage_cache_entries(path) == (1, 1)
    finally:
        path.chmod(0o644)


def test_memory_stays_in_memory_without_create(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    conn = connect_wal(":memory:", "stage cache", CACHE_TABLES, create=False)
    conn.execute("CREATE TABLE stage_cache (key TEXT)")
    conn.close()
    assert os.listdir(tmp_path) == []
