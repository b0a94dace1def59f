"""`graph.tracing.open_saver` (the saver the README names for reading traces) is also a checkpointer the agent can
run with: `score_video` / `ascore_videos` run async, and SqliteSaver has no async methods, so every run given
`checkpointer=open_saver(path)` was ineligible with "agent: NotImplementedError: The SqliteSaver does not support
async methods"."""

from __future__ import annotations

from graph_scripts import FakeSurprise, full_script

INSTRUCTION = "push the red block to the right"


def test_score_video_with_open_saver_scores_and_traces_the_run(clip, tmp_path):
    from graph import AgentConfig, AgentTools, score_video
    from graph.backbone import Backbone
    from graph.testing import ScriptedChatModel
    from graph.tracing import open_saver, read_trace
    from tools.motion import LKTracker

    db = tmp_path / "traces.sqlite"
    backbone = Backbone(ScriptedChatModel(full_script()), schema_retries=1, max_retries=1, timeout_s=10,
                        retry_wait=(0.0, 0.0))
    result = score_video(clip, INSTRUCTION, AgentConfig(preset="no_wmreward"), backbone=backbone,
                         tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()),
                         checkpointer=open_saver(db), durability="async")
    assert result.status == "scored", result.reasons
    trace = read_trace(open_saver(db, read_only=True), result.run_id)
    assert trace.status == "scored" and trace.steps[-1]["node"] == "gate"
