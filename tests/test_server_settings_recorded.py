"""RAA_INSPECT_MODE=plan and RAA_COORDINATES=pixels fit the agent to its server (no tool calling; a model that
grounds in pixels), they do not change the method: a run made with them is its preset's, not "full+". They counted
as overrides (`graph.config.config_overrides`), so every run against a Qwen2.5-VL server was listed as a modified
preset by `raa runs`. They are now recorded apart, as the run's `server` settings, which `raa trace`'s header and
`raa runs --json` show; runs recorded before, with them among their overrides, are read the same way."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from graph.cli import app
from graph.config import AgentConfig, config_overrides, recorded_settings, server_settings

runner = CliRunner()
QWEN25 = {"inspect_mode": "plan", "coordinates": "pixels"}


def test_server_settings_are_not_overrides() -> None:
    cfg = AgentConfig(preset="full", **QWEN25).resolved()  # type: ignore[arg-type]
    assert config_overrides(cfg) == {}
    assert server_settings(cfg) == QWEN25
    assert server_settings(AgentConfig().resolved()) == {"inspect_mode": "tools", "coordinates": "unit"}
    tuned = AgentConfig(preset="full", audit=False, inspect_mode="plan").resolved()
    assert config_overrides(tuned) == {"audit": False}


def test_an_older_runs_overrides_are_split() -> None:
    """Runs recorded before listed the server settings that differ from the defaults among their overrides."""
    assert recorded_settings({"inspect_mode": "plan", "audit": False}, {}) == ({"audit": False}, {"inspect_mode": "plan"})
    assert recorded_settings({}, QWEN25) == ({}, QWEN25)


def test_a_run_fitted_to_its_server_is_its_preset_and_says_how(monkeypatch, tmp_path) -> None:
    from graph_scripts import FakeSurprise, full_script, moving_square

    from graph import AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.testing import ScriptedChatModel
    from graph.tracing import open_saver
    from tools.motion import LKTracker

    db = tmp_path / "traces.sqlite"
    clip = moving_square(tmp_path / "clip.mp4")
    agent = build_reward_agent(AgentConfig(preset="full", **QWEN25),  # type: ignore[arg-type]
                               backbone=Backbone(ScriptedChatModel(full_script()), retry_wait=(0.0, 0.0)),
                               tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()),
                               checkpointer=open_saver(db))
    out = agent.invoke({"video": str(clip), "instruction": "push the red block to the right"},
                       {"configurable": {"thread_id": "run-qwen25"}})
    result = out["result"]
    assert result.status == "scored", result.reasons
    assert result.preset == "full" and result.overrides == {} and result.server == QWEN25
    assert out["overrides"] == {} and out["server"] == QWEN25

    monkeypatch.setenv("RAA_TRACES_PATH", str(db))
    line = next(line for line in runner.invoke(app, ["runs"], env={"COLUMNS": "200"}).output.splitlines()
                if "run-qwen25" in line)
    assert " full " in line and "full+" not in line, line
    header = runner.invoke(app, ["trace", "run-qwen25"], env={"COLUMNS": "250"}).output.splitlines()[0]
    assert "preset=full  server: inspect_mode=plan, coordinates=pixels  status=scored" in header, header
    row = json.loads(runner.invoke(app, ["runs", "--json"]).output.splitlines()[0])
    assert row["preset"] == "full" and row["overrides"] == {} and row["server"] == QWEN25


def test_an_older_run_with_server_settings_among_its_overrides_is_not_full_plus() -> None:
    from graph.trace_commands import _preset_text, _run_cells
    from graph.tracing import RunTrace

    old = RunTrace("run-old", "2026-01-01T00:00:00", {"preset": "full", "overrides": {"inspect_mode": "plan"}})
    assert _run_cells(old, True)[2] == "full"
    assert _preset_text(old) == "full  server: inspect_mode=plan"
    tuned = RunTrace("run-tuned", "2026-01-01T00:00:00",
                     {"preset": "full", "overrides": {"audit": False, "coordinates": "pixels"}})
    assert _run_cells(tuned, True)[2] == "full+"
    assert _preset_text(tuned) == "full+ (audit=False)  server: coordinates=pixels"
