"""`raa trace` of a run that stopped before the gate (a crash, an interrupt) prints the notes its stages wrote so
far: a finished run shows them among the result's reasons, but an incomplete run has no result, and reflect's
guard notes (a rubric level it raised, kept) were only in `--json` while its step said "2 unbacked change(s)
guarded"."""

from __future__ import annotations

from typer.testing import CliRunner

from graph.cli import app
from tests.graph_scripts import FakeSurprise, assessment, full_script, moving_square


def test_trace_of_an_incomplete_run_prints_its_notes(tmp_path) -> None:
    from graph import AgentConfig, AgentTools, build_reward_agent
    from graph.backbone import Backbone
    from graph.testing import ScriptedChatModel
    from graph.tracing import open_saver
    from tools.motion import LKTracker

    db = tmp_path / "traces.sqlite"
    model = ScriptedChatModel(full_script(assess=[assessment(phys=2, vis=2)], reflect=[assessment(phys=5, vis=2)]))
    backbone = Backbone(model, schema_retries=1, max_retries=1, timeout_s=10, retry_wait=(0.0, 0.0))
    agent = build_reward_agent(AgentConfig(preset="full"), backbone=backbone, checkpointer=open_saver(db),
                               tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise()))
    agent.invoke({"video": str(moving_square(tmp_path / "m.mp4")), "instruction": "push the red block to the right",
                  "run_id": "r1"}, {"configurable": {"thread_id": "r1"}}, interrupt_before=["audit"])
    text = CliRunner().invoke(app, ["trace", "r1", "--db", str(db)], env={"COLUMNS": "80"}).output
    assert "status=incomplete" in text and "[8] reflect" in text, text
    assert "note: reflect: physical_level kept 2 (a reflection does not raise a rubric level" in text, text
