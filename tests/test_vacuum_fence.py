"""`raa prune --vacuum` against a run claimed right after its in-flight check (`graph.run_claims`).

The check (no run claimed by a live process) and the VACUUM were two steps: a run claimed between them went
ahead, and the VACUUM then held the file's write lock longer than that run's trace writes wait. The check now
writes a fence row in the same write transaction as the claims are read, and a claim waits on a live fence
as it waits on the write lock (`run_claims.WAIT_S`), then fails naming the vacuum."""

from __future__ import annotations

import datetime as dt
import sqlite3

import pytest
from test_retention import NOW, _cli, _traces

from graph import retention, run_claims


@pytest.fixture
def db(tmp_path, monkeypatch):
    monkeypatch.setattr(run_claims, "WAIT_S", 0.2)  # how long the late claim waits on the vacuum (not timed)
    path = tmp_path / "traces.sqlite"
    _traces(path, [(f"r{i}", NOW - dt.timedelta(minutes=10 - i), "scored") for i in range(3)])
    return path


def _claim_before_vacuum(monkeypatch, db) -> dict[str, object]:
    """Make a claim of run "late" at the moment between the in-flight check and the VACUUM of the trace file;
    the returned dict gets its outcome (None: claimed; else the claim's error or holder)."""
    outcome: dict[str, object] = {}
    real = retention.vacuum

    def claim_then_vacuum(path, what, setting, **kw):
        if what == "trace database":
            try:
                outcome["late"] = run_claims._claim(str(db), "late")
            except sqlite3.OperationalError as exc:
                outcome["late"] = exc
        real(path, what, setting, **kw)

    monkeypatch.setattr(retention, "vacuum", claim_then_vacuum)
    return outcome


@pytest.mark.parametrize("args", [("--vacuum",), ("--keep", "1", "--yes", "--vacuum")])
def test_a_claim_made_between_the_check_and_the_vacuum_is_not_granted(db, tmp_path, monkeypatch, args):
    outcome = _claim_before_vacuum(monkeypatch, db)
    res = _cli(tmp_path, *args)
    assert res.exit_code == 0 and f"vacuuming {db}" in res.output, res.output
    assert isinstance(outcome["late"], sqlite3.OperationalError), outcome  # old code: None, the run went ahead
    assert "vacuum" in str(outcome["late"]) and "raa prune" in str(outcome["late"])
    assert run_claims._claim(str(db), "late") is None  # the vacuum has ended: its fence is gone


def test_a_fence_left_by_a_dead_vacuum_does_not_block_claims(db):
    """A prune killed during its vacuum leaves its fence row: stale as a claim of the same process would be."""
    old = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=7)).isoformat(timespec="seconds")
    assert run_claims.fence_vacuum(str(db)) == []
    conn = sqlite3.connect(str(db))
    conn.execute(f"UPDATE {run_claims.VACUUMS_TABLE} SET host = 'crashed-node-17', claimed = ?", (old,))
    conn.commit()
    conn.close()
    assert run_claims._claim(str(db), "r9") is None  # 7 h old, of another host: stale at the default 6 h
    with pytest.raises(sqlite3.OperationalError, match="vacuum"):
        run_claims._claim(str(db), "r8", max_age_s=8 * 3600.0)  # the same fence within a longer age


def test_the_fence_is_refused_while_runs_are_in_flight_and_writes_nothing(db):
    assert run_claims._claim(str(db), "r2") is None
    assert run_claims.fence_vacuum(str(db)) == ["r2"]
    conn = sqlite3.connect(str(db))
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.close()
    assert run_claims.VACUUMS_TABLE not in tables


def test_the_next_vacuum_clears_fences_left_by_dead_vacuums(db):
    """Fence rows of killed prunes were ignored but never deleted; the next fence (same write transaction)
    drops those that are stale by the claims' rule, and keeps a live one."""
    old = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=7)).isoformat(timespec="seconds")
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    assert run_claims.fence_vacuum(str(db)) == []
    run_claims.unfence_vacuum(str(db))
    conn = sqlite3.connect(str(db))
    conn.executemany(f"INSERT INTO {run_claims.VACUUMS_TABLE} VALUES (?, ?, ?, ?)",
                     [("crashed-node-17", 4242, None, old), ("live-node-3", 77, None, now)])
    conn.commit()
    conn.close()
    with pytest.raises(sqlite3.OperationalError, match="vacuum"):
        run_claims._claim(str(db), "r7")  # the live node's fence (another host, fresh): claims wait on it
    assert run_claims.fence_vacuum(str(db)) == []
    run_claims.unfence_vacuum(str(db))
    conn = sqlite3.connect(str(db))
    left = conn.execute(f"SELECT host FROM {run_claims.VACUUMS_TABLE}").fetchall()
    conn.close()
    assert left == [("live-node-3",)]  # old code: the crashed node's row stays for good


def test_the_vacuum_drops_the_claims_of_runs_that_died(db):
    """A run killed mid-way leaves its claim (taken over only if its id is claimed again); with no run in
    flight, every claim left is such a row, and the fence's transaction deletes them (and their start rows)."""
    old = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=7)).isoformat(timespec="seconds")
    assert run_claims._claim(str(db), "r5") is None
    conn = sqlite3.connect(str(db))
    conn.execute(f"UPDATE {run_claims.CLAIMS_TABLE} SET host = 'crashed-node-17', claimed = ?", (old,))
    conn.execute(f"UPDATE {run_claims.STARTS_TABLE} SET host = 'crashed-node-17'")
    conn.commit()
    conn.close()
    assert run_claims.fence_vacuum(str(db)) == []  # the dead claim is not in flight
    run_claims.unfence_vacuum(str(db))
    conn = sqlite3.connect(str(db))
    left = [conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
            for t in (run_claims.CLAIMS_TABLE, run_claims.STARTS_TABLE)]
    conn.close()
    assert left == [0, 0]  # old code: [1, 1] for good
