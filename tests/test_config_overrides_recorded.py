"""A preset with overrides is not the preset: the result, the trace and `raa runs` / `raa trace` say which
settings differ from the preset's (`graph.config.config_overrides`). Before, `AgentConfig(preset="full",
audit=False, frame_budget=8)` recorded just "full" in its result and its `raa runs` row, so two differently
configured runs looked identical (the state kept the switches, not the caps, and only the HTML report read
them). The preset label itself stays the paper's name: tables group and `--preset` filters by it."""

from __future__ import annotations

from typer.testing import CliRunner

from graph.cli import app
from graph.config import AgentConfig, config_overrides

runner = CliRunner()


def test_overrides_are_the_settings_that_differ_from_the_preset() -> None:
    assert config_overrides(AgentConfig(preset="full").resolved()) == {}
    assert config_overrides(AgentConfig(preset="no_audit").resolved()) == {}  # the preset's own switch
    assert config_overrides(AgentConfig(preset="full", audit=True).resolved()) == {}  # what the preset has
    assert config_overrides(AgentConfig(preset="full", draw=3).resolved()) == {}  # a draw is no setting
    cfg = AgentConfig(preset="full", audit=False, frame_budget=8, inspect_mode="plan").resolved()
    assert config_overrides(cfg) == {"audit": False, "frame_budget": 8}  # the server's (test_server_settings_recorded)


def test_a_run_with_overrides_is_told_apart_from_the_plain_preset(monkeypatch, tmp_path) -> None:
    from graph_scripts import FakeSurprise, full_script, moving_square

    from graph import AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.testing import ScriptedChatModel
    from graph.tracing import open_saver
    from tools.motion import LKTracker

    db = tmp_path / "traces.sqlite"
    clip = moving_square(tmp_path / "clip.mp4")
    results = {}
    for run_id, cfg in (("run-plain", AgentConfig(preset="full")),
                        ("run-tuned", AgentConfig(preset="full", audit=False, frame_budget=8))):
        agent = build_reward_agent(cfg, backbone=Backbone(ScriptedChatModel(full_script()), retry_wait=(0.0, 0.0)),
                                   tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()),
                                   checkpointer=open_saver(db))
        out = agent.invoke({"video": str(clip), "instruction": "push the red block to the right"},
                           {"configurable": {"thread_id": run_id}})
        results[run_id] = out["result"]
    assert results["run-plain"].preset == results["run-tuned"].preset == "full"
    assert results["run-plain"].overrides == {}
    assert results["run-tuned"].overrides == {"audit": False, "frame_budget": 8}

    monkeypatch.setenv("RAA_TRACES_PATH", str(db))
    lines = runner.invoke(app, ["runs"], env={"COLUMNS": "200"}).output.splitlines()
    tuned = next(line for line in lines if "run-tuned" in line)
    plain = next(line for line in lines if "run-plain" in line)
    assert "full+" in tuned and "full+" not in plain, (tuned, plain)
    out = runner.invoke(app, ["trace", "run-tuned"], env={"COLUMNS": "250"}).output
    assert "preset=full+ (frame_budget=8, audit=False)" in out, out
    import json
    rows = {r["run_id"]: r for r in map(json.loads, runner.invoke(app, ["runs", "--json"]).output.splitlines())}
    assert rows["run-tuned"]["overrides"] == {"audit": False, "frame_budget": 8} and rows["run-plain"]["overrides"] == {}
