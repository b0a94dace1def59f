"""The order of the extra evidence tools decides the order of their reports in reflect's prompt (the extra node
records one per tool, in the agent's order, and reflect lists them so, keeping the first images when there are
more than a request carries). A run started with tools [a, b] and resumed by an agent of [b, a] before its extra
step showed reflect "b"'s report first under a record naming [a, b]: other messages, another answer. The guard
compares the names in order, and the refusal names both orders."""

from __future__ import annotations

import pytest
from graph_scripts import FakeSurprise, full_script

from graph import AgentConfig, AgentTools, build_reward_agent
from graph.backbone import Backbone
from graph.config import run_settings
from graph.testing import ScriptedChatModel
from graph.thread_guard import resume_refusal
from graph.tracing import traces_serde
from tools.motion import LKTracker

INSTRUCTION = "push the red block to the right"
CONFIG = {"configurable": {"thread_id": "ordered"}}


class _Report:
    """An extra evidence tool (`tools.extra`) reporting one sentence of its own."""

    def __init__(self, name: str) -> None:
        self.name = name

    def evaluate(self, frames, instruction):
        from tools.extra import EvidenceReport

        return EvidenceReport(summary=f"report of {self.name}")


def _agent(saver, names: list[str]):
    model = ScriptedChatModel(full_script())
    backbone = Backbone(model, schema_retries=1, max_retries=1, timeout_s=10, retry_wait=(0.0, 0.0))
    return build_reward_agent(AgentConfig(preset="full"), backbone=backbone, checkpointer=saver,
                              tools=AgentTools(tracker=LKTracker(), surprise=FakeSurprise(),
                                               extra=[_Report(n) for n in names])), model


def test_reflect_shows_the_reports_in_the_tools_order(clip):
    from langgraph.checkpoint.memory import InMemorySaver

    for names in (["a", "b"], ["b", "a"]):
        agent, model = _agent(InMemorySaver(serde=traces_serde()), names)
        agent.invoke({"video": str(clip), "instruction": INSTRUCTION}, CONFIG)
        text = model.calls_for("reflect")[0].text()
        first, second = (text.index(f"- {n}: report of {n}") for n in names)
        assert first < second, text


def test_a_run_resumed_with_its_extra_tools_in_another_order_is_refused(clip):
    from langgraph.checkpoint.memory import InMemorySaver

    from graph.thread_guard import ResumeMismatchError

    saver = InMemorySaver(serde=traces_serde())
    first, _ = _agent(saver, ["a", "b"])
    for chunk in first.stream({"video": str(clip), "instruction": INSTRUCTION}, CONFIG, stream_mode="updates",
                              durability="sync"):
        if "assess" in chunk:
            break
    assert first.get_state(CONFIG).next == ("inspect",)  # before the extra step
    with pytest.raises(ResumeMismatchError, match=r"extra evidence tools \['a', 'b'\] \(agent \['b', 'a'\]\)"):
        _agent(saver, ["b", "a"])[0].invoke(None, CONFIG)
    out = _agent(saver, ["a", "b"])[0].invoke(None, CONFIG)  # the same order: resumed
    assert out["result"].status == "scored" and [r["tool"] for r in out["extra_evidence"]] == ["a", "b"]


def test_the_refusal_names_both_orders():
    cfg = AgentConfig(preset="full").resolved()
    values = {**run_settings(cfg, ["b", "a"]), "steps": [{"node": "assess"}]}
    refused = resume_refusal("old", values, run_settings(cfg, ["a", "b"]))
    assert refused is not None and "extra evidence tools ['b', 'a'] (agent ['a', 'b'])" in str(refused)
    assert resume_refusal("old", values, run_settings(cfg, ["b", "a"])) is None
