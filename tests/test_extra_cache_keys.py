"""The extra-tool job key holds which tool ran (`tools.extra.extra_tool_identity`), not only its place in the
agent's list: agents with different extra tools sharing one frame cache and a run id (`score_batch(frame_store=...,
items with run_id)`) got the first agent's report for the second agent's tool at the same place."""

from __future__ import annotations

from types import SimpleNamespace

from graph.context import AgentTools, tool_provider
from graph.frame_store import FrameStore
from graph.nodes.extra import _job
from tools.extra import EvidenceReport


class Check:
    """An extra evidence tool answering `verdict`."""

    name = "check"

    def __init__(self, verdict: str) -> None:
        self.verdict = verdict

    def evaluate(self, frames, instruction):
        return EvidenceReport(summary=self.verdict)


def _ctx(store: FrameStore, *tools):
    return SimpleNamespace(frames=store, tools=tool_provider(AgentTools(extra=tools)))


def test_another_agents_tool_at_the_same_place_does_not_take_its_report(clip):
    store = FrameStore()
    store.meta(str(clip))  # the quality step stats the clip first: the key holds that version
    a, b = _ctx(store, Check("gripper closed")), _ctx(store, Check("gripper open"))
    report, _ = _job(a, 0, str(clip), 33, "grasp", "run-1", start=True).result(timeout=60)
    assert report.summary == "gripper closed"
    assert _job(a, 0, str(clip), 33, "grasp", "run-1", start=False) is not None  # its own run finds it
    assert _job(b, 0, str(clip), 33, "grasp", "run-1", start=False) is None
    report, _ = _job(b, 0, str(clip), 33, "grasp", "run-1", start=True).result(timeout=60)
    assert report.summary == "gripper open"


def test_one_tool_shared_by_two_agents_keeps_one_job(clip):
    store, tool = FrameStore(), Check("gripper closed")
    store.meta(str(clip))
    first = _job(_ctx(store, tool), 0, str(clip), 33, "grasp", "run-1", start=True)
    assert _job(_ctx(store, tool), 0, str(clip), 33, "grasp", "run-1", start=False) is first
