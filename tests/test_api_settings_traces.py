"""`score_video(settings=s)` / `ascore_videos(settings=s)` honour all of the trace settings in `s`: they used its
`traces_path` but ran with durability "exit" and the 6 h foreign-claim age whatever `s.trace_durability` and
`s.foreign_claim_max_age_s` said, so a caller who set RAA_TRACE_DURABILITY=async in the settings object got no
per-step checkpoints, and a crashed host's claim it had aged out still blocked its run id. Explicit
`durability=` / `claim_max_age_s=` still win over the settings."""

from __future__ import annotations

import asyncio
import datetime as dt
import sqlite3

import pytest
from graph_scripts import FakeSurprise, full_script

from graph.settings import BackboneSettings

INSTRUCTION = "push the red block to the right"


def _foreign_claim(db, run_id: str, age: dt.timedelta) -> None:
    """A claim of `run_id` by a host that is not this one, made `age` ago (a crashed node)."""
    from graph.tracing import open_saver

    open_saver(db)  # a trace database first (one holding only the claims table is refused)
    claimed = (dt.datetime.now(dt.UTC) - age).isoformat(timespec="seconds")
    conn = sqlite3.connect(str(db))
    conn.execute("CREATE TABLE IF NOT EXISTS raa_run_claims (thread_id TEXT PRIMARY KEY, host TEXT NOT NULL, "
                 "pid INTEGER NOT NULL, claimed TEXT NOT NULL)")
    conn.execute("INSERT INTO raa_run_claims VALUES (?, 'crashed-node-17', 4242, ?)", (run_id, claimed))
    conn.commit()
    conn.close()


def _checkpoints(db, run_id: str) -> int:
    conn = sqlite3.connect(str(db))
    try:
        return conn.execute("SELECT count(*) FROM checkpoints WHERE thread_id = ?", (run_id,)).fetchone()[0]
    finally:
        conn.close()


def _parts() -> dict:
    from graph import AgentConfig, AgentTools
    from graph.backbone import Backbone
    from graph.testing import ScriptedChatModel
    from tools.motion import LKTracker

    backbone = Backbone(ScriptedChatModel(full_script()), schema_retries=1, max_retries=1, timeout_s=10,
                        retry_wait=(0.0, 0.0))
    return {"config": AgentConfig(preset="decomposed"), "backbone": backbone,
            "tools": AgentTools(tracker=LKTracker(), surprise=FakeSurprise())}


def _settings(db) -> BackboneSettings:
    return BackboneSettings(traces_path=str(db), trace_durability="async", foreign_claim_max_age_s=300)


def _score_video(clip, db, run_id: str, **kwargs):
    from graph import score_video

    return score_video(str(clip), INSTRUCTION, settings=_settings(db), run_id=run_id, **_parts(), **kwargs)


def _ascore_videos(clip, db, run_id: str, **kwargs):
    from graph import ascore_videos

    items = [{"video": str(clip), "instruction": INSTRUCTION, "run_id": run_id}]
    return asyncio.run(ascore_videos(items, settings=_settings(db), **_parts(), **kwargs))[0]


@pytest.mark.parametrize("score", [_score_video, _ascore_videos], ids=["score_video", "ascore_videos"])
def test_the_settings_trace_durability_and_claim_age_are_used(clip, tmp_path, score):
    db = tmp_path / "traces.sqlite"
    _foreign_claim(db, "stale", dt.timedelta(minutes=10))  # stale at the settings' 300 s, not at 6 h
    result = score(clip, db, "stale")
    assert result.status == "scored", result.reasons
    assert _checkpoints(db, "stale") > 1  # "async": a checkpoint per step, not one at the end


@pytest.mark.parametrize("score", [_score_video, _ascore_videos], ids=["score_video", "ascore_videos"])
def test_explicit_arguments_win_over_the_settings(clip, tmp_path, score):
    db = tmp_path / "traces.sqlite"
    _foreign_claim(db, "held", dt.timedelta(minutes=10))
    refused = score(clip, db, "held", claim_max_age_s=3600.0)  # younger than the given age: still held
    assert refused.reward is None and "already running in process 4242 on crashed-node-17" in refused.reasons[0]
    result = score(clip, db, "once", durability="exit")
    assert result.status == "scored", result.reasons
    assert _checkpoints(db, "once") == 1


def test_settings_read_from_the_environment_give_the_trace_settings_too(clip, tmp_path, monkeypatch):
    """Without `settings=`, the agent's trace database comes from the environment (RAA_TRACES_PATH): so do its
    durability and claim age, from the same settings, not "exit" and 6 h beside that database."""
    from graph import score_video

    db = tmp_path / "traces.sqlite"
    monkeypatch.setenv("RAA_TRACES_PATH", str(db))
    monkeypatch.setenv("RAA_TRACE_DURABILITY", "async")
    monkeypatch.setenv("RAA_FOREIGN_CLAIM_MAX_AGE_S", "300")
    _foreign_claim(db, "stale", dt.timedelta(minutes=10))
    result = score_video(str(clip), INSTRUCTION, run_id="stale", **_parts())
    assert result.status == "scored", result.reasons
    assert _checkpoints(db, "stale") > 1


def test_a_ready_agent_keeps_its_own_claim_age(clip, tmp_path):
    """`ascore_videos(agent=...)` / `arun_agent` without a claim age run with the one the agent was built with (bound
    from its settings, `graph.builder`), as the agent's own `invoke` does: they passed the 6 h default over it, so one
    agent took a crashed host's 10-minute-old claim over when invoked and was refused it through the API."""
    from graph import ascore_videos, build_reward_agent
    from graph.api import arun_agent
    from graph.builder import default_checkpointer

    db = tmp_path / "traces.sqlite"
    for run_id in ("stale", "stale2"):
        _foreign_claim(db, run_id, dt.timedelta(minutes=10))  # stale at the agent's 300 s, not at 6 h
    parts = _parts()
    agent = build_reward_agent(parts.pop("config"), checkpointer=default_checkpointer(db), **parts,
                               settings=BackboneSettings(traces_path=str(db), foreign_claim_max_age_s=300))
    items = [{"video": str(clip), "instruction": INSTRUCTION, "run_id": "stale"}]
    result = asyncio.run(ascore_videos(items, agent=agent))[0]
    assert result.status == "scored", result.reasons
    result = asyncio.run(arun_agent(agent, str(clip), INSTRUCTION, "stale2", "decomposed"))
    assert result.status == "scored", result.reasons
