"""Extra evidence tools (tools.extra): a researcher's own evaluators, consulted once per clip and shown
in reflect as supporting evidence; a failing tool makes the run ineligible; reports never set the reward."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from graph_scripts import FakeSurprise, full_script, moving_square, nodes, run

from graph import AgentConfig, AgentTools, build_reward_agent
from graph.backbone import Backbone
from graph.testing import ScriptedChatModel
from tests.graph_scripts import textured_frames
from tools.extra import EvidenceReport
from tools.motion import LKTracker
from tools.video import FrameIndexError, VideoDecodeError


class GripperCheck:
    """A stand-in task-specific evaluator: reports the frame where the red block moved most."""

    name = "gripper_check"

    def __init__(self, reply: object = None, error: Exception | None = None) -> None:
        self.reply, self.error = reply, error
        self.calls: list[tuple[tuple, str, str]] = []

    def evaluate(self, frames: np.ndarray, instruction: str):
        self.calls.append((frames.shape, instruction, threading.current_thread().name))
        if self.error is not None:
            raise self.error
        if self.reply is not None:
            return self.reply
        diffs = np.abs(np.diff(frames.astype(np.int16), axis=0)).mean(axis=(1, 2, 3))
        peak = int(np.argmax(diffs)) + 1
        return EvidenceReport(summary=f"largest change at frame {peak}", frames=[peak, 500], values={"peak": peak})


def _agent(preset: str = "full", tools=(), script=None, checkpointer=False, **cfg):
    model = ScriptedChatModel(script or full_script())
    backbone = Backbone(model, schema_retries=1, max_retries=1, timeout_s=10, retry_wait=(0.0, 0.0))
    agent = build_reward_agent(AgentConfig(preset=preset, **cfg), backbone=backbone, checkpointer=checkpointer,
                               tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise(), extra=list(tools)))
    return agent, model


def test_reports_reach_reflect_with_their_frames_and_never_set_the_reward(tmp_path):
    clip = moving_square(tmp_path / "c.mp4")
    tool = GripperCheck()
    agent, model = _agent(tools=[tool])
    out = run(agent, clip)
    plain, _ = _agent()
    baseline = run(plain, clip)
    assert out["result"].status == "scored" and out["result"].reward == pytest.approx(baseline["result"].reward)
    assert len(tool.calls) == 1
    shape, instruction, thread = tool.calls[0]
    assert shape[0] == 33 and shape[-1] == 3 and instruction == "push the red block to the right"
    assert thread.startswith("raa-")  # a worker thread, not the event loop
    report = out["extra_evidence"][0]
    assert report["tool"] == "gripper_check" and 500 not in report["frames"]  # outside the 33-frame clip
    reflect = model.calls_for("reflect")[0].text()
    assert "gripper_check: largest change at frame" in reflect and "peak=" in reflect
    assert "check each against the contract and the frames" in reflect
    assert model.calls_for("reflect")[0].images() >= 1
    assert all("gripper_check" not in c.text() for c in model.calls_for("observe") + model.calls_for("assess"))
    step = next(s for s in out["steps"] if s["node"] == "extra")
    assert "1 report" in step["decision"] and "1 frame reference outside the frames the tools saw dropped" in step["decision"]
    seq = nodes(out)  # after the inspect loop and surprise, right before reflect (its work started in quality)
    assert seq.index("tool_call") < seq.index("surprise") < seq.index("extra") == seq.index("reflect") - 1
    assert "gripper_check (" in step["tool_summaries"][0] and " s): " in step["tool_summaries"][0]


def test_a_failing_or_malformed_tool_makes_the_run_ineligible(tmp_path):
    clip = moving_square(tmp_path / "c.mp4")
    for tool, reason in [(GripperCheck(error=RuntimeError("CUDA out of memory")), "CUDA out of memory"),
                         (GripperCheck(reply=0.9), "returned float, not an EvidenceReport"),
                         (GripperCheck(reply={"summary": ""}), "report is invalid")]:
        agent, model = _agent(tools=[tool])
        result = run(agent, clip)["result"]
        assert result.status == "ineligible" and result.reward is None
        assert any("gripper_check" in r and reason in r for r in result.reasons), result.reasons
        # the tool runs beside assess and the inspect loop (started by quality); its fault ends the run
        # wherever it is first known (assess, an inspect round or the extra node), always before reflect
        assert model.calls_for("reflect") == [] and model.calls_for("audit") == []
        # the same thread again (no checkpointer): the failed job is run afresh, once per run
        assert run(agent, clip)["result"].reasons == result.reasons and len(tool.calls) == 2


@pytest.mark.parametrize("error", [VideoDecodeError("reference.mp4: corrupt"), FrameIndexError("frame 40 of 33")])
def test_a_video_error_of_the_tool_is_the_tools_fault_not_the_clips(tmp_path, error):
    """The tool gets the clip's decoded frames: a VideoError it raises is its own failure (an outage, retried), not
    the clip's final video fault (a VideoDecodeError was) nor the agent's internal one (a FrameIndexError was)."""
    clip = moving_square(tmp_path / "c.mp4")
    agent, _ = _agent(tools=[GripperCheck(error=error)])
    result = run(agent, clip)["result"]
    assert result.status == "ineligible" and [f.kind for f in result.faults] == ["tool"] and result.outage
    assert result.faults[0].message == f"gripper_check run: {type(error).__name__}: {error}"


def test_a_dict_report_is_accepted(tmp_path):
    agent, model = _agent(tools=[GripperCheck(reply={"summary": "gripper closed on the block", "frames": [5]})])
    out = run(agent, moving_square(tmp_path / "c.mp4"))
    assert out["result"].status == "scored"
    assert "gripper closed on the block" in model.calls_for("reflect")[0].text()


def test_presets_without_reflect_do_not_run_the_tools(tmp_path):
    clip = moving_square(tmp_path / "c.mp4")
    for preset in ("direct", "decomposed"):
        tool = GripperCheck()
        agent, _ = _agent(preset, tools=[tool])
        out = run(agent, clip)
        assert out["result"].status == "scored" and "extra" not in nodes(out) and tool.calls == []


def test_reflect_shows_at_most_four_frames_of_a_report(tmp_path):
    import re

    tool = GripperCheck(reply=EvidenceReport(summary="see these", frames=list(range(0, 33, 2))))
    agent, model = _agent(tools=[tool])
    plain, plain_model = _agent()
    clip = moving_square(tmp_path / "c.mp4")
    assert run(agent, clip)["result"].status == "scored" and run(plain, clip)["result"].status == "scored"
    call = model.calls_for("reflect")[0]
    shown = re.search(r"\(frames shown: \[([0-9, ]+)\]\)", call.text())
    assert shown and len(shown.group(1).split(",")) == 4  # 4 of the 17 referenced frames
    assert call.images() == plain_model.calls_for("reflect")[0].images() + 4


def test_tool_names_are_checked_when_the_agent_is_built():
    class Nameless:
        def evaluate(self, frames, instruction):
            return EvidenceReport(summary="x")

    with pytest.raises(TypeError, match="no `name`"):
        _agent(tools=[Nameless()])
    with pytest.raises(ValueError, match="unique"):
        _agent(tools=[GripperCheck(), GripperCheck()])
    bad = GripperCheck()
    bad.name = "grip check!"
    with pytest.raises(ValueError, match="letters, digits"):
        _agent(tools=[bad])

    class NoEvaluate:  # every run was ineligible as "extra: internal: AttributeError ..."
        name = "no_evaluate"

    with pytest.raises(TypeError, match="'no_evaluate' .*no callable `evaluate`"):
        _agent(tools=[NoEvaluate()])


def test_the_training_reward_takes_tools_with_extra_evaluators(tmp_path):
    """AgentReward(tools=...) reaches the agent it builds, so a training script can add its own tools."""
    from graph.settings import BackboneSettings
    from training.rewards import AgentReward, call_reward

    tool = GripperCheck()
    model = ScriptedChatModel(full_script())
    fn = AgentReward(preset="full", max_concurrency=2, model=model,
                     settings=BackboneSettings(cache_path=None, traces_path=str(tmp_path / "traces.sqlite")),
                     tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise(), extra=[tool]))
    rng = np.random.default_rng(0)
    clips = [textured_frames(rng) for _ in range(2)]
    out = call_reward(fn, "agent", clips, ["pick the cup", "open the drawer"], fps=8.0, iteration=1)
    assert all(r is not None for r in out.rewards), fn.last_reasons
    assert sorted(c[1] for c in tool.calls) == ["open the drawer", "pick the cup"]
    assert all("gripper_check:" in c.text() for c in model.calls_for("reflect"))


def test_the_run_report_lists_the_reports(tmp_path):
    from evals.report import render_run_report
    from graph.tracing import open_saver, read_trace

    saver = open_saver(tmp_path / "traces.sqlite")
    agent, _ = _agent(tools=[GripperCheck()], checkpointer=saver)
    run(agent, moving_square(tmp_path / "c.mp4"), run_id="run-extra")
    html = render_run_report(read_trace(saver, "run-extra"))
    assert 'id="extra-evidence"' in html and "gripper_check" in html and "largest change at frame" in html
    plain, _ = _agent(checkpointer=saver)
    run(plain, moving_square(tmp_path / "c.mp4"), run_id="run-plain")
    assert 'id="extra-evidence"' not in render_run_report(read_trace(saver, "run-plain"))


def test_a_toolbox_from_settings_carries_extra_tools(tmp_path):
    """The configured tools (here LK from default ToolSettings) plus your own, in one Toolbox."""
    from tools.settings import ToolSettings
    from tools.toolbox import Toolbox

    tool = GripperCheck()
    model = ScriptedChatModel(full_script())
    agent = build_reward_agent(AgentConfig(preset="no_wmreward"), checkpointer=False,
                               backbone=Backbone(model, retry_wait=(0.0, 0.0)),
                               tools=Toolbox(ToolSettings(), extra=[tool]))
    out = run(agent, moving_square(tmp_path / "c.mp4"))
    assert out["result"].status == "scored" and len(tool.calls) == 1
    assert "gripper_check:" in model.calls_for("reflect")[0].text()
    with pytest.raises(ValueError, match="unique"):
        Toolbox(ToolSettings(), extra=[GripperCheck(), GripperCheck()])


def test_extra_tools_wait_at_later_priority_until_assess(tmp_path, monkeypatch):
    """Like the surprise scoring, the quality step queues the tools at "later" and assess moves them to "now":
    with no slot for "later" jobs, observe sees the job queued at "later" and assess sees it at "now"."""
    import graph.workers as workers
    from graph.frame_store import FrameStore
    from tests.graph_scripts import job_priorities_script

    store = FrameStore()
    script, seen = job_priorities_script(store, "extra")
    monkeypatch.setattr(workers, "LATER_SLOTS", 0)
    model = ScriptedChatModel(script)
    backbone = Backbone(model, schema_retries=1, max_retries=1, timeout_s=10, retry_wait=(0.0, 0.0))
    agent = build_reward_agent(AgentConfig(preset="full"), backbone=backbone, checkpointer=False, frame_store=store,
                               tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise(), extra=[GripperCheck()]))
    out = run(agent, moving_square(tmp_path / "c.mp4"))
    assert out["result"].status == "scored", out["result"].reasons
    assert seen["observe"] == [(False, "later")]
    assert [queued_at for _, queued_at in seen["assess"]] == ["now"]


def test_frame_references_past_the_frames_a_tool_saw_are_dropped(tmp_path, monkeypatch):
    """A tool sees the first MAX_EXTRA_FRAMES frames; a reference past them (in the clip, but not in what the
    tool saw) was shown in reflect as that tool's evidence."""
    monkeypatch.setattr("graph.nodes.extra.MAX_EXTRA_FRAMES", 20)
    clip = moving_square(tmp_path / "c.mp4")
    tool = GripperCheck(reply=EvidenceReport(summary="seen", frames=[5, 25]))
    agent, _ = _agent(tools=[tool])
    out = run(agent, clip)
    assert tool.calls[0][0][0] == 20
    assert out["extra_evidence"][0]["frames"] == [5]
    step = next(s for s in out["steps"] if s["node"] == "extra")
    assert "1 frame reference outside the frames the tools saw dropped" in step["decision"], step["decision"]
