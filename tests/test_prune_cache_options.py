"""`raa prune --cache --cache-before WHEN`: the README offers the two as alternatives
(`[--cache | --cache-before 30d]`): --cache deletes every stage cache entry, --cache-before only the old
ones. Given together they ask for two different deletions; the prune applied only the date limit and
said nothing, so a researcher who meant "clear the cache" kept most of it. Now it is refused (exit 2)
before anything is read or deleted."""

from __future__ import annotations

import sqlite3
import time

from typer.testing import CliRunner

from graph.cache import StageCache
from graph.cli import app
from graph.retention import stage_cache_entries

runner = CliRunner()


def _cache_with_old_and_new(path) -> None:
    """Two entries, one stored 40 days ago."""
    cache = StageCache(path)
    cache.put("old", "1")
    cache.put("new", "2")
    cache.close()
    conn = sqlite3.connect(str(path))
    conn.execute("UPDATE stage_cache SET created = ? WHERE key = 'old'", (time.time() - 40 * 86400,))
    conn.commit()
    conn.close()


def test_cache_and_cache_before_together_are_refused_and_delete_nothing(tmp_path):
    cache_path = tmp_path / "cache.sqlite"
    _cache_with_old_and_new(cache_path)
    assert stage_cache_entries(cache_path, before=None) == (2, 2)
    env = {"RAA_TRACES_PATH": str(tmp_path / "traces.sqlite"), "RAA_CACHE_PATH": str(cache_path)}
    res = runner.invoke(app, ["prune", "--cache", "--cache-before", "30d", "--yes"], env=env)
    assert res.exit_code == 2, res.output
    assert "--cache" in res.output and "--cache-before" in res.output and "not both" in res.output
    assert stage_cache_entries(cache_path) == (2, 2)  # nothing deleted, neither the old entry nor all


def test_cache_before_alone_still_deletes_only_old_entries(tmp_path):
    cache_path = tmp_path / "cache.sqlite"
    _cache_with_old_and_new(cache_path)
    env = {"RAA_TRACES_PATH": str(tmp_path / "traces.sqlite"), "RAA_CACHE_PATH": str(cache_path)}
    res = runner.invoke(app, ["prune", "--cache-before", "30d", "--yes"], env=env)
    assert res.exit_code == 0 and "deleted 1 stage cache entries; 1 remain" in res.output, res.output
