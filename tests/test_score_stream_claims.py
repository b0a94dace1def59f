"""`raa score --stream` claims its run id in the trace database like `raa score` (`graph.run_claims`): the
streaming path ran `agent.astream` itself, without the claim, so a second process could run the same id at
the same time, and `raa prune` could not see the streaming run in flight."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from graph.cli import app
from tests.cli_agent_helpers import _clip, _env, runner
from tests.test_plain_invoke_claims import claimed_by_parent


def _claims(db) -> list[tuple]:
    """(run id, pid) of the claims in the trace database `db` (none before any claim made the table)."""
    conn = sqlite3.connect(str(db))
    try:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'raa_run_claims'").fetchone():
            return []
        return conn.execute("SELECT thread_id, pid FROM raa_run_claims").fetchall()
    finally:
        conn.close()


def _live_claim(db, run_id: str) -> None:
    """A trace database in which a live process of this host (the test runner's parent) claims `run_id`."""
    from graph.builder import default_checkpointer

    saver = default_checkpointer(db)
    saver.setup()  # the trace database's own tables
    saver.conn.close()
    claimed_by_parent(db, run_id)


@pytest.mark.parametrize("stream", [False, True])
def test_a_run_id_claimed_by_a_live_process_is_refused_with_and_without_stream(monkeypatch, tmp_path, stream):
    pytest.importorskip("graph.builder")
    from graph import api

    _env(monkeypatch, tmp_path)
    monkeypatch.setattr(api, "new_run_id", lambda: "taken")
    _live_claim(tmp_path / "traces.sqlite", "taken")
    clip = _clip(tmp_path / "u.mp4", uniform=True)  # scored without model calls
    res = runner.invoke(app, ["score", clip, "-i", "push the block", "--json", "--preset", "no_wmreward"]
                        + (["--stream"] if stream else []))
    assert res.exit_code == 3, res.output
    result = json.loads(res.stdout.strip().splitlines()[-1])
    assert result["status"] == "ineligible"
    assert f"run id 'taken' is already running in process {os.getppid()}" in result["reasons"][0]
    assert _claims(tmp_path / "traces.sqlite") == [("taken", os.getppid())]  # the other process's claim stays


def test_a_streaming_run_holds_its_claim_while_it_runs_and_releases_it(monkeypatch, tmp_path):
    pytest.importorskip("graph.builder")
    from graph import run_claims

    _env(monkeypatch, tmp_path)
    db = tmp_path / "traces.sqlite"
    seen: list[list[tuple]] = []
    real_describe = __import__("graph.commands", fromlist=["describe_update"]).describe_update

    def describe(node, update):  # runs between node updates, i.e. while the run is in flight
        seen.append(_claims(db))
        return real_describe(node, update)

    monkeypatch.setattr("graph.commands.describe_update", describe)
    clip = _clip(tmp_path / "u.mp4", uniform=True)
    res = runner.invoke(app, ["score", clip, "-i", "push the block", "--json", "--stream", "--preset", "no_wmreward"])
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout.strip().splitlines()[-1])
    assert result["status"] == "zero" and "quality" in res.output  # still streamed
    assert seen and all(rows == [(result["run_id"], os.getpid())] for rows in seen), seen
    run_claims.join_releases(5)
    assert _claims(db) == []  # released once the run ended
