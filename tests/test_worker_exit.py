"""A worker job that raises SystemExit or KeyboardInterrupt (`sys.exit` in a custom tool, argparse in a research
model's loader reading the trainer's own command line) fails as an ordinary exception: raised as it was in the task
awaiting it, it passed every stage's handler, left the event loop, and `ascore_videos` lost the whole group (a
plain script exited with the tool's code and printed nothing)."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path

import pytest
from graph_scripts import FakeSurprise, full_script, moving_square, tool_call

from graph.workers import JobExit, run_blocking


@pytest.mark.parametrize("exc", [SystemExit(2), KeyboardInterrupt(), asyncio.CancelledError("its own loop's task")])
def test_a_job_raising_systemexit_or_keyboardinterrupt_fails_as_an_ordinary_exception(exc):
    """asyncio.CancelledError too: raised by the job itself (a tool's own `asyncio.run` whose task was cancelled),
    it is not a cancellation of the task awaiting the job, which it cancelled as if it were (the group was lost)."""
    def job():
        raise exc

    try:
        asyncio.run(run_blocking(job))
        got = None
    except BaseException as caught:  # noqa: BLE001 - what escaped is the point of the test
        got = caught
    assert isinstance(got, JobExit) and isinstance(got, Exception), repr(got)
    assert type(exc).__name__ in str(got) and got.__cause__ is exc


class ExitsWhenReleased:
    """An extra evidence tool that calls sys.exit for instructions starting with "bad", once `release` is set."""

    name = "exits"

    def __init__(self) -> None:
        self.release = threading.Event()

    def evaluate(self, frames, instruction):
        from tools.extra import EvidenceReport

        if instruction.startswith("bad"):
            self.release.wait()
            sys.exit(2)
        return EvidenceReport(summary="fine")


def test_a_tool_that_exits_makes_its_clip_ineligible_and_the_group_keeps_its_other_results(tmp_path: Path):
    from langgraph.checkpoint.memory import InMemorySaver

    from graph import AgentConfig, AgentTools, ascore_videos, build_reward_agent
    from graph.backbone import Backbone
    from graph.testing import ScriptedChatModel
    from tools.motion import LKTracker

    tool = ExitsWhenReleased()

    def inspect_reply(_messages, k):  # calls 0-1: the good clip's run, 2-3: the bad one's (one run at a time)
        if k % 2 == 0:
            return tool_call("view_frames", {"frames": [10, 20]})
        if k == 3:  # the bad run's last inspect round: its checks for failed evidence are behind it
            tool.release.set()
        return "The frames confirm R1 and R2."

    model = ScriptedChatModel(full_script(inspect=inspect_reply))
    backbone = Backbone(model, schema_retries=1, max_retries=1, timeout_s=10, retry_wait=(0.0, 0.0))
    agent = build_reward_agent(AgentConfig(preset="full"), backbone=backbone, checkpointer=InMemorySaver(),
                               tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise(), extra=[tool]))
    clip = str(moving_square(tmp_path / "a.mp4"))
    items = [(clip, "push the red block to the right"), (clip, "bad: push the red block to the right")]
    good, bad = asyncio.run(ascore_videos(items, agent=agent, max_concurrency=1))
    assert good.status == "scored" and good.reward is not None
    assert bad.status == "ineligible" and bad.reward is None
    assert any("extra" in r and "SystemExit" in r for r in bad.reasons), bad.reasons
