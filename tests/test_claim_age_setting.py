"""RAA_FOREIGN_CLAIM_MAX_AGE_S: after how long a run-id claim written on another host is stale
(`graph.run_claims`). It was a module constant (6 h): an operator whose crashed node's claims blocked run ids
and `raa prune` could not shorten it, nor lengthen it for runs that take longer. It is now a setting, read in
`BackboneSettings.from_env` and passed down to the claim and prune paths."""

from __future__ import annotations

import asyncio
import datetime as dt
import sqlite3

import pytest
from typer.testing import CliRunner

from graph.settings import BackboneSettings, SettingsError

INSTRUCTION = "push the red block to the right"


def _foreign_claims(db, claims: list[tuple[str, dt.timedelta]]) -> None:
    """Claims of a host that is not this one, each made `age` ago."""
    now = dt.datetime.now(dt.UTC)
    conn = sqlite3.connect(str(db))
    conn.execute("CREATE TABLE IF NOT EXISTS raa_run_claims (thread_id TEXT PRIMARY KEY, host TEXT NOT NULL, "
                 "pid INTEGER NOT NULL, claimed TEXT NOT NULL)")
    conn.executemany("INSERT INTO raa_run_claims VALUES (?, 'crashed-node-17', 4242, ?)",
                     [(tid, (now - age).isoformat(timespec="seconds")) for tid, age in claims])
    conn.commit()
    conn.close()


def test_the_setting_is_read_and_a_bad_value_is_refused_by_name():
    assert BackboneSettings.from_env({}).foreign_claim_max_age_s == 6 * 3600.0
    assert BackboneSettings.from_env({"RAA_FOREIGN_CLAIM_MAX_AGE_S": "300"}).foreign_claim_max_age_s == 300.0
    for bad in ("0", "-5", "abc", "nan", "inf"):
        with pytest.raises(SettingsError, match="RAA_FOREIGN_CLAIM_MAX_AGE_S"):
            BackboneSettings.from_env({"RAA_FOREIGN_CLAIM_MAX_AGE_S": bad})


def test_a_foreign_claim_older_than_the_configured_age_is_stale_and_a_younger_one_is_not(clip, tmp_path):
    from test_run_ids import _agent_on

    from graph.api import arun_agent
    from graph.run_claims import running

    db = tmp_path / "traces.sqlite"
    agent = _agent_on(db)
    _foreign_claims(db, [("old", dt.timedelta(minutes=10)), ("young", dt.timedelta(minutes=1))])
    conn = sqlite3.connect(str(db))
    assert running(conn, max_age_s=300) == {"young"}
    assert running(conn) == {"old", "young"}  # the default (6 h) holds both
    conn.close()
    took = asyncio.run(arun_agent(agent, str(clip), INSTRUCTION, "old", "decomposed", claim_max_age_s=300))
    assert took.status == "scored", took.reasons
    refused = asyncio.run(arun_agent(agent, str(clip), INSTRUCTION, "young", "decomposed", claim_max_age_s=300))
    assert refused.reward is None and "already running in process 4242 on crashed-node-17" in refused.reasons[0]


def test_raa_prune_takes_the_age_from_the_environment(tmp_path):
    """The edge passes the setting down: with a short age a crashed host's run is no longer spared."""
    from test_retention import NOW, _traces

    from graph.cli import app

    db = tmp_path / "traces.sqlite"
    _traces(db, [(f"r{i}", NOW - dt.timedelta(minutes=10 - i), "scored") for i in range(3)])
    _foreign_claims(db, [("r0", dt.timedelta(minutes=10))])
    env = {"RAA_TRACES_PATH": str(db), "RAA_CACHE_PATH": "off"}
    res = CliRunner().invoke(app, ["prune", "--keep", "0", "--dry-run"], env=env)
    assert res.exit_code == 0 and "2 of 3 runs" in res.output and "1 more in flight" in res.output, res.output
    res = CliRunner().invoke(app, ["prune", "--keep", "0", "--yes", "--vacuum"],
                             env={**env, "RAA_FOREIGN_CLAIM_MAX_AGE_S": "300"})
    assert res.exit_code == 0 and "deleted 3 runs; 0 remain" in res.output, res.output


def test_raa_runs_and_raa_trace_take_the_age_from_the_environment(tmp_path):
    """`raa runs` / `raa trace` judged another host's claim by the default 6 h, not the setting prune and claiming
    use: with RAA_FOREIGN_CLAIM_MAX_AGE_S=300 a crashed host's 10-minute-old claim is stale for `raa prune` and a
    new claim, yet `raa runs` listed that run as "running" and `raa trace` said it "is still running"."""
    import json

    from graph.cli import app
    from graph.tracing import open_saver

    db = tmp_path / "traces.sqlite"
    open_saver(db).conn.close()
    _foreign_claims(db, [("r-crashed", dt.timedelta(minutes=10))])
    runner = CliRunner()
    for age, status in ((None, "running"), ("300", "died")):
        env = {"RAA_TRACES_PATH": str(db)} | ({} if age is None else {"RAA_FOREIGN_CLAIM_MAX_AGE_S": age})
        res = runner.invoke(app, ["runs", "--json"], env=env)
        assert res.exit_code == 0, res.output
        assert [json.loads(r)["status"] for r in res.output.splitlines()] == [status], (age, res.output)
        res = runner.invoke(app, ["trace", "r-crashed"], env=env)
        assert res.exit_code == 1 and ("still running" in res.output) == (status == "running"), (age, res.output)
    res = runner.invoke(app, ["runs"], env={"RAA_TRACES_PATH": str(db), "RAA_FOREIGN_CLAIM_MAX_AGE_S": "0"})
    assert res.exit_code == 2 and "RAA_FOREIGN_CLAIM_MAX_AGE_S" in res.output, res.output
