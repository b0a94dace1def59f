"""A relative clip path is recorded absolute in the trace (`raa score`, `score_video`, `ascore_videos`), as
`raa score-batch` and the trainer record theirs: `raa report RUN` run from another folder then still finds
the clip's frames (it said "frames unavailable: video file not found")."""

from __future__ import annotations

import asyncio

import pytest
from graph_scripts import FakeSurprise, full_script, moving_square
from typer.testing import CliRunner

from graph.cli import app
from graph.tracing import open_saver, read_trace
from tests.test_cli_agent import _scripted

INSTRUCTION = "push the red block to the right"


def test_raa_score_records_the_absolute_clip_path(monkeypatch, tmp_path):
    pytest.importorskip("graph.builder")
    _scripted(monkeypatch, tmp_path)
    moving_square(tmp_path / "m.mp4")
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["score", "m.mp4", "-i", INSTRUCTION, "--preset", "no_wmreward", "--json"])
    assert res.exit_code == 0, res.output
    run_id = res.output.split("raa trace ")[1].split()[0]
    saver = open_saver(tmp_path / "traces.sqlite", read_only=True)
    assert read_trace(saver, run_id).values["video"] == str((tmp_path / "m.mp4").resolve())


def test_the_python_api_records_the_absolute_clip_path(monkeypatch, tmp_path):
    from langgraph.checkpoint.memory import InMemorySaver

    from graph import AgentConfig, AgentTools, ascore_videos, score_video
    from graph.testing import ScriptedChatModel
    from graph.tracing import traces_serde
    from tools.motion import LKTracker

    moving_square(tmp_path / "m.mp4")
    monkeypatch.chdir(tmp_path)
    saver = InMemorySaver(serde=traces_serde())
    tools = AgentTools(tracker=LKTracker(), surprise=FakeSurprise())
    config = AgentConfig(preset="no_wmreward")
    one = score_video("m.mp4", INSTRUCTION, config, model=ScriptedChatModel(full_script()), tools=tools,
                      checkpointer=saver)
    [two] = asyncio.run(ascore_videos([("./m.mp4", INSTRUCTION)], config, model=ScriptedChatModel(full_script()),
                                      tools=tools, checkpointer=saver))
    assert one.status == two.status == "scored"
    for result in (one, two):
        assert read_trace(saver, result.run_id).values["video"] == str((tmp_path / "m.mp4").resolve())
