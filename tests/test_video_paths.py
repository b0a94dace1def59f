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


def test_a_path_that_cannot_be_resolved_is_that_clips_ineligible_result_not_the_groups_error(tmp_path):
    """Making a path absolute resolved it on the filesystem: a clip behind a symlink loop (RuntimeError) or
    with a NUL byte in its name (ValueError) made `ascore_videos` raise before any run, and every other
    clip of the group lost its result. Such a clip is now kept as given (made absolute) and the run that
    cannot open it is its own ineligible result with the reason."""
    from graph_scripts import make_agent

    from graph import AgentConfig, ascore_videos, score_video
    from graph.testing import ScriptedChatModel

    good = moving_square(tmp_path / "m.mp4")
    (tmp_path / "loop_a").symlink_to(tmp_path / "loop_b")
    (tmp_path / "loop_b").symlink_to(tmp_path / "loop_a")
    looped, nul = str(tmp_path / "loop_a" / "clip.mp4"), str(tmp_path / "bad\x00.mp4")
    agent, _ = make_agent("decomposed")
    items = [(looped, INSTRUCTION), (str(good), INSTRUCTION), (nul, INSTRUCTION)]
    results = asyncio.run(ascore_videos(items, AgentConfig(preset="decomposed"), agent=agent))
    assert [r.status for r in results] == ["ineligible", "scored", "ineligible"]
    assert looped in results[0].reasons[0] and "symbolic links" in results[0].reasons[0]
    assert "null byte" in results[2].reasons[0]
    single = score_video(looped, INSTRUCTION, AgentConfig(preset="decomposed"), checkpointer=False,
                         model=ScriptedChatModel(full_script()))
    assert single.status == "ineligible" and looped in single.reasons[0]


def test_a_manifest_path_in_a_symlink_loop_is_that_lines_error_not_the_batchs(tmp_path):
    """score-batch's manifest reader: resolving a path in a symlink loop raises RuntimeError on Python < 3.13
    (OSError after), which was not caught, so one such line stopped the whole batch."""
    import json

    from graph.batch import read_manifest

    (tmp_path / "a.mp4").symlink_to(tmp_path / "b.mp4")
    (tmp_path / "b.mp4").symlink_to(tmp_path / "a.mp4")
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("\n".join(json.dumps({"path": p, "instruction": "x"}) for p in ("a.mp4", "ok.mp4")) + "\n")
    items = read_manifest(manifest, "full")
    assert items[0]["error"] is not None and "line 1" in items[0]["error"]
    assert items[1]["error"] is None and items[1]["path"] == str(tmp_path / "ok.mp4")
