"""Trace retention (graph/retention.py, `raa prune`): which runs are selected, what is deleted, and that a
run's neighbours, the confirmation and the stage cache behave as documented."""

from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime, timedelta

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from typer.testing import CliRunner

from graph import run_claims
from graph.cache import StageCache
from graph.cli import app
from graph.retention import delete_runs, file_bytes, parse_cutoff, select_runs, stage_cache_entries, vacuum
from graph.stores import StoreError
from graph.tracing import list_runs, open_saver, read_trace

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
runner = CliRunner()


def test_parse_cutoff_hand_computed():
    assert parse_cutoff("7d", NOW) == datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    assert parse_cutoff("12h", NOW) == datetime(2026, 11, 30, 0, 0, tzinfo=UTC)
    assert parse_cutoff("30m", NOW) == datetime(2026, 11, 30, 11, 30, tzinfo=UTC)
    assert parse_cutoff("2w", NOW) == datetime(2026, 11, 16, 12, 0, tzinfo=UTC)
    assert parse_cutoff("2026-11-01", NOW) == datetime(2026, 11, 1, tzinfo=UTC)  # UTC when no zone
    assert parse_cutoff("2026-11-01T12:00+02:00", NOW) == datetime(2026, 11, 1, 10, 0, tzinfo=UTC)
    for bad in ("yesterday", "7 days", "-3d", ""):
        with pytest.raises(ValueError, match="neither an age"):
            parse_cutoff(bad, NOW)


def _traces(path, runs: list[tuple[str, datetime, str]], pad: int = 0) -> None:
    """Checkpoints of runs (id, last update, status), oldest first, like the agent's: the result in
    channel_values. `pad` adds that many characters of step text to each (to give the file some size)."""
    saver = open_saver(path)
    for run_id, when, status in runs:
        cp = empty_checkpoint()
        cp["ts"] = when.isoformat()
        result = None if status == "incomplete" else {"status": status, "reward": 0.5 if status == "scored" else 0.0}
        cp["channel_values"] = {"preset": "full", "video": f"{run_id}.mp4", "steps": [{"node": "x" * pad}],
                                **({"result": result} if result else {})}
        saver.put({"configurable": {"thread_id": run_id, "checkpoint_ns": ""}}, cp, {}, {})
    saver.conn.close()


RUNS = [("r0", NOW - timedelta(days=9), "scored"), ("r1", NOW - timedelta(days=8), "ineligible"),
        ("r2", NOW - timedelta(days=3), "incomplete"), ("r3", NOW - timedelta(days=2), "ineligible"),
        ("r4", NOW - timedelta(hours=1), "scored")]


def test_selection_combines_every_criterion(tmp_path):
    db = tmp_path / "traces.sqlite"
    _traces(db, RUNS)
    week = NOW - timedelta(days=7)
    assert select_runs(db, keep=2).run_ids == ["r2", "r1", "r0"]  # newest first, the newest two spared
    assert select_runs(db, keep=0).run_ids == ["r4", "r3", "r2", "r1", "r0"]
    assert select_runs(db, keep=9).run_ids == []
    assert select_runs(db, before=week).run_ids == ["r1", "r0"]
    assert select_runs(db, status="ineligible").run_ids == ["r3", "r1"]
    assert select_runs(db, status="ineligible", before=week).run_ids == ["r1"]
    assert select_runs(db, keep=3, status="incomplete").run_ids == []  # r2 is among the newest three
    assert select_runs(db, keep=1).total == 5
    with pytest.raises(ValueError, match="say which runs"):
        select_runs(db)
    with pytest.raises(ValueError, match="status must be one of"):
        select_runs(db, status="failed")
    with pytest.raises(ValueError, match="keep must be >= 0"):
        select_runs(db, keep=-1)


def test_a_pending_fork_of_a_finished_run_is_not_an_incomplete_run(tmp_path):
    """A time-travel fork (update_state, not resumed) is the thread's latest checkpoint and reads as
    incomplete; `prune --status incomplete` (meant for crash leftovers) deleted the finished run with it."""
    db = tmp_path / "traces.sqlite"
    _traces(db, RUNS)
    saver = open_saver(db)
    fork = empty_checkpoint()  # after r4's scored checkpoint: the fork, before the gate, without a result
    fork["ts"] = NOW.isoformat()
    fork["channel_values"] = {"preset": "full", "video": "r4.mp4", "steps": []}
    saver.put({"configurable": {"thread_id": "r4", "checkpoint_ns": ""}}, fork, {"source": "update"}, {})
    saver.conn.close()
    assert select_runs(db, status="incomplete").run_ids == ["r2"]


def test_runs_in_flight_are_spared_and_a_dead_claim_is_not(tmp_path):
    """With per-step checkpoints a run in flight reads as incomplete; `--status incomplete` (or `--keep 0`)
    deleted its history while it ran. Its live claim (graph.run_claims) now spares it."""
    db = tmp_path / "traces.sqlite"
    _traces(db, RUNS)
    assert run_claims._claim(str(db), "r2") is None  # r2 is running in this process
    assert run_claims._claim(str(db), "r1") is None
    conn = sqlite3.connect(db)  # r1's claim: a process that has ended (its pid now runs another process)
    conn.execute(f"UPDATE {run_claims.STARTS_TABLE} SET started = started + 1 WHERE thread_id = 'r1'")
    conn.commit()
    conn.close()
    chosen = select_runs(db, status="incomplete")
    assert chosen.run_ids == [] and chosen.running == 1
    assert select_runs(db, keep=0).run_ids == ["r4", "r3", "r1", "r0"]
    assert select_runs(db, status="ineligible").running == 0  # r2 would not have matched anyway
    assert delete_runs(db, ["r3", "r2"]) == 1  # claimed after the selection: still spared
    assert [r.run_id for r in list_runs(open_saver(db))] == ["r4", "r2", "r1", "r0"]
    res = _cli(tmp_path, "--keep", "0", "--yes")
    assert res.exit_code == 0 and "3 of 4 runs" in res.output and "1 more in flight" in res.output, res.output
    assert "deleted 3 runs; 1 remain" in res.output
    run_claims._release(str(db), "r2")  # the run has ended: no longer spared
    assert select_runs(db, status="incomplete").run_ids == ["r2"]


def test_delete_runs_leaves_the_others_whole(tmp_path):
    db = tmp_path / "traces.sqlite"
    _traces(db, RUNS)
    assert delete_runs(db, ["r1", "r3"]) == 2
    saver = open_saver(db)
    assert [r.run_id for r in list_runs(saver)] == ["r4", "r2", "r0"]
    assert read_trace(saver, "r4").reward == 0.5 and read_trace(saver, "r0").status == "scored"
    assert saver.conn.execute("SELECT COUNT(*) FROM checkpoints WHERE thread_id IN ('r1', 'r3')").fetchone() == (0,)


def test_vacuum_shrinks_the_file_and_fails_clearly_while_busy(tmp_path):
    db = tmp_path / "traces.sqlite"
    _traces(db, [(f"r{i}", NOW - timedelta(minutes=100 - i), "scored") for i in range(40)], pad=20_000)
    delete_runs(db, select_runs(db, keep=2).run_ids)
    before = file_bytes(db)
    vacuum(db, "trace database", "RAA_TRACES_PATH")
    assert file_bytes(db) < before / 5
    assert [r.run_id for r in list_runs(open_saver(db))] == ["r39", "r38"]
    other = sqlite3.connect(str(db), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process writing
    try:
        with pytest.raises(StoreError, match="trace database .* is locked by another process"):
            vacuum(db, "trace database", "RAA_TRACES_PATH", wait_s=0.1)
    finally:
        other.execute("ROLLBACK")
        other.close()


def _dated(path, entries: dict[str, float]) -> None:
    cache = StageCache(path)
    for key in entries:
        cache.put(key, "out")
    cache.close()
    conn = sqlite3.connect(str(path))
    conn.executemany("UPDATE stage_cache SET created = ? WHERE key = ?", [(t, k) for k, t in entries.items()])
    conn.commit()
    conn.close()


def test_stage_cache_entries_by_age(tmp_path):
    path = tmp_path / "cache.sqlite"
    now = datetime(2026, 11, 30, 12, tzinfo=UTC)
    day = 86400.0
    _dated(path, {"old": now.timestamp() - 10 * day, "week": now.timestamp() - 7 * day - 1,
                  "new": now.timestamp() - day})
    cutoff = now - timedelta(days=7)
    assert stage_cache_entries(path, before=cutoff) == (2, 3)  # counting deletes nothing
    assert stage_cache_entries(path, before=cutoff, delete=True) == (2, 3)
    cache = StageCache(path)
    assert len(cache) == 1 and cache.get("new") == "out"
    before = time.time()
    cache.put("fresh", "out")  # a put dates its entry
    cache.close()
    conn = sqlite3.connect(str(path))
    assert conn.execute("SELECT created FROM stage_cache WHERE key = 'fresh'").fetchone()[0] >= before
    conn.close()
    assert stage_cache_entries(path, delete=True) == (2, 2)  # no cutoff: every entry
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(str(empty)).close()
    assert stage_cache_entries(empty, before=cutoff) == (0, 0)  # no table yet


def test_a_stage_cache_from_before_dates_is_dated_on_open(tmp_path):
    """Old files have no `created` column: opening one adds it, its old entries count as older than any
    cutoff, and new ones are dated; counting an old file that was never reopened works too."""
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(str(path))
    conn.execute("CREATE TABLE stage_cache (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.executemany("INSERT INTO stage_cache VALUES (?, ?)", [("a", "1"), ("b", "2")])
    conn.commit()
    conn.close()
    cutoff = datetime.now(UTC) - timedelta(days=3650)
    assert stage_cache_entries(path, before=cutoff) == (2, 2)  # undated, never opened since
    cache = StageCache(path)
    assert cache.get("a") == "1"  # the old entries are still read
    cache.put("c", "3")
    cache.close()
    StageCache(path).close()  # reopening a dated file changes nothing
    assert stage_cache_entries(path, before=cutoff, delete=True) == (2, 3)
    assert stage_cache_entries(path) == (1, 1)


def _cli(tmp_path, *args: str, input: str | None = None):
    env = {"RAA_TRACES_PATH": str(tmp_path / "traces.sqlite"), "RAA_CACHE_PATH": str(tmp_path / "cache.sqlite")}
    return runner.invoke(app, ["prune", *args], env=env, input=input)


def test_cli_dry_run_confirmation_and_delete(tmp_path):
    _traces(tmp_path / "traces.sqlite", RUNS)
    res = _cli(tmp_path, "--status", "ineligible", "--dry-run")
    assert res.exit_code == 0, res.output
    assert "2 of 5 runs" in res.output and "r3" in res.output and "nothing deleted" in res.output
    res = _cli(tmp_path, "--status", "ineligible", input="n\n")
    assert res.exit_code == 1 and "nothing deleted" in res.output
    assert len(list_runs(open_saver(tmp_path / "traces.sqlite"))) == 5
    res = _cli(tmp_path, "--status", "ineligible", input="y\n")
    assert res.exit_code == 0 and "deleted 2 runs; 3 remain" in res.output, res.output
    res = runner.invoke(app, ["runs", "--json", "--db", str(tmp_path / "traces.sqlite")])
    assert [line.split('"run_id": "')[1][:2] for line in res.output.splitlines()] == ["r4", "r2", "r0"]


def test_cli_cache_and_refusals(tmp_path):
    cache = StageCache(tmp_path / "cache.sqlite")
    cache.put("k", "v")
    cache.close()
    res = _cli(tmp_path, "--cache", "--yes")
    assert res.exit_code == 0 and "deleted 1 stage cache entries; 0 remain" in res.output, res.output
    assert "no trace database" not in res.output  # runs were not asked for
    _dated(tmp_path / "cache.sqlite", {"old": time.time() - 9 * 86400, "new": time.time()})
    res = _cli(tmp_path, "--cache-before", "7d", "--dry-run")
    assert res.exit_code == 0 and "1 of 2 stage cache entries" in res.output, res.output
    res = _cli(tmp_path, "--cache-before", "7d", "--yes")
    assert res.exit_code == 0 and "deleted 1 stage cache entries; 1 remain" in res.output, res.output
    assert "no trace database" not in res.output  # the cache's own cutoff selects no runs
    res = _cli(tmp_path, "--cache-before", "last week")
    assert res.exit_code == 2 and "--cache-before: 'last week' is neither an age" in res.output
    res = _cli(tmp_path)
    assert res.exit_code == 2 and "say what to delete" in res.output
    res = _cli(tmp_path, "--before", "last week")
    assert res.exit_code == 2 and "--before: 'last week' is neither an age" in res.output
    res = _cli(tmp_path, "--keep", "1", "--yes")
    assert res.exit_code == 0 and "no trace database" in res.output
    res = _cli(tmp_path, "--status", "lost", "--yes")  # refused before looking for a database
    assert res.exit_code == 2 and "status must be one of" in res.output


def test_cli_vacuum_shrinks_what_an_earlier_prune_freed(tmp_path):
    """`--vacuum` ran only when this prune deleted something: after a prune without it, the file could not be
    shrunk at all (`--keep N --vacuum` matched nothing and stopped before the vacuum)."""
    db = tmp_path / "traces.sqlite"
    _traces(db, [(f"r{i}", NOW - timedelta(minutes=100 - i), "scored") for i in range(40)], pad=20_000)
    assert _cli(tmp_path, "--keep", "2", "--yes").exit_code == 0
    before = file_bytes(db)
    res = _cli(tmp_path, "--keep", "2", "--vacuum", "--yes")
    assert res.exit_code == 0 and "0 of 2 runs" in res.output, res.output
    assert file_bytes(db) < before / 5
    assert [r.run_id for r in list_runs(open_saver(db))] == ["r39", "r38"]


def test_cli_vacuum_alone_shrinks_both_files_and_deletes_nothing(tmp_path):
    """`raa prune --vacuum` on its own was refused ("say what to delete"), though it deletes nothing: the
    space a prune without --vacuum freed needed a made-up criterion to be given back. Alone it shrinks the
    trace database and the stage cache, keeping every run and entry, and asks nothing."""
    db = tmp_path / "traces.sqlite"
    _traces(db, [(f"r{i}", NOW - timedelta(minutes=100 - i), "scored") for i in range(40)], pad=20_000)
    assert _cli(tmp_path, "--keep", "2", "--yes").exit_code == 0
    _dated(tmp_path / "cache.sqlite", {f"k{i}": time.time() for i in range(3)})
    before = file_bytes(db)
    res = _cli(tmp_path, "--vacuum", "--dry-run")
    assert res.exit_code == 0 and "dry run: nothing vacuumed" in res.output and file_bytes(db) == before, res.output
    res = _cli(tmp_path, "--vacuum")  # no --yes, no input: nothing to confirm
    assert res.exit_code == 0, res.output
    assert f"{db}: " in res.output and f"{tmp_path / 'cache.sqlite'}: " in res.output and "MiB -> " in res.output
    assert file_bytes(db) < before / 5
    assert [r.run_id for r in list_runs(open_saver(db))] == ["r39", "r38"]
    assert stage_cache_entries(tmp_path / "cache.sqlite") == (3, 3)
    (tmp_path / "cache.sqlite").unlink()
    db.unlink()
    res = _cli(tmp_path, "--vacuum")
    assert res.exit_code == 0 and "no trace database at" in res.output and "no stage cache at" in res.output
    res = _cli(tmp_path)
    assert res.exit_code == 2 and "say what to delete" in res.output and "--vacuum alone" in res.output


def test_prune_counts_only_the_runs_it_deleted(tmp_path, monkeypatch):
    """`delete_runs` counted every id it was given, so runs already gone when it ran (another prune while this
    one waited at its prompt, an id given twice) were reported as deleted, and "remain" was worked out from
    that count. It now counts the runs whose checkpoints it removed, and the CLI reads what remains."""
    import typer

    db = tmp_path / "traces.sqlite"
    _traces(db, RUNS)
    assert delete_runs(db, ["r0", "r0", "gone"]) == 1

    def another_prune_meanwhile(*args, **kwargs):
        assert delete_runs(db, ["r1"]) == 1
        return True

    monkeypatch.setattr(typer, "confirm", another_prune_meanwhile)
    res = _cli(tmp_path, "--status", "ineligible")
    assert res.exit_code == 0 and "2 of 4 runs" in res.output, res.output
    assert "deleted 1 runs; 2 remain" in res.output, res.output
    assert [r.run_id for r in list_runs(open_saver(db))] == ["r4", "r2"]


def test_vacuum_is_refused_while_runs_are_in_flight(tmp_path):
    """VACUUM holds the trace file's write lock while it rewrites the file, which on a big database takes longer
    than a run's trace write waits (`graph.stores.TRACE_WAIT_S`): every run in flight then lost its trace. A
    vacuum of a trace database with runs claimed by live processes is now refused (exit 2, nothing rewritten);
    once they have ended it runs, and says so before it starts."""
    db = tmp_path / "traces.sqlite"
    _traces(db, [(f"r{i}", NOW - timedelta(minutes=100 - i), "scored") for i in range(40)], pad=20_000)
    assert _cli(tmp_path, "--keep", "2", "--yes").exit_code == 0
    assert run_claims._claim(str(db), "r39") is None  # a run of this process is writing r39
    before = file_bytes(db)
    res = _cli(tmp_path, "--vacuum")
    assert res.exit_code == 2 and "1 run(s) in flight" in res.output and "r39" in res.output, res.output
    assert file_bytes(db) == before
    res = _cli(tmp_path, "--keep", "1", "--vacuum", "--yes")  # the prune itself goes on; its vacuum does not
    assert res.exit_code == 2 and "deleted 1 runs; 1 remain" in res.output and "in flight" in res.output, res.output
    run_claims._release(str(db), "r39")
    res = _cli(tmp_path, "--vacuum")
    assert res.exit_code == 0 and f"vacuuming {db}" in res.output, res.output
    assert file_bytes(db) < before / 5


@pytest.mark.parametrize("delete", [False, True], ids=["count", "delete"])
def test_stage_cache_entries_of_no_cache_create_nothing(tmp_path, delete):
    """Counting or pruning the stage cache where there is none finds no entry and leaves no file (an empty SQLite
    database was created there, by the connection that counted)."""
    path = tmp_path / "none.sqlite"
    assert stage_cache_entries(path, before=NOW, delete=delete) == (0, 0)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
