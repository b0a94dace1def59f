"""`raa trace` prints the run's model usage (replies received, requests sent, images, tokens): the trace gave no
account of it, so a run whose stages were retried after timeouts (`attempts` above `calls`) read as a clean one,
and an incomplete run's usage so far was only in `--json`."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from graph.cli import app
from tests.graph_scripts import CONTRACT, FakeSurprise, full_script, moving_square


def test_trace_prints_usage_with_attempts(tmp_path) -> None:
    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.testing import ScriptedChatModel
    from graph.tracing import open_saver
    from tools.motion import LKTracker

    db = tmp_path / "traces.sqlite"
    model = ScriptedChatModel(full_script(contract=[TimeoutError("slow"), CONTRACT]))
    backbone = Backbone(model, schema_retries=1, max_retries=1, timeout_s=10, retry_wait=(0.0, 0.0))
    agent = build_reward_agent(AgentConfig(preset="full"), backbone=backbone, checkpointer=open_saver(db),
                               tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()))
    out = agent.invoke({"video": str(moving_square(tmp_path / "m.mp4")), "instruction": "push the red block to the "
                        "right", "run_id": "r1"}, {"configurable": {"thread_id": "r1"}})
    usage = out["result"].usage
    assert usage["attempts"] == usage["calls"] + 1
    text = CliRunner().invoke(app, ["trace", "r1", "--db", str(db)], env={"COLUMNS": "80"}).output
    line = next((ln for ln in text.splitlines() if ln.startswith("usage: ")), None)
    assert line is not None, text
    shown = dict(re.findall(r"(\w+)=(\d+)", line))
    assert shown == {k: str(v) for k, v in usage.items()}, line
