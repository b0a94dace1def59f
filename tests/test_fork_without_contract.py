"""A fork that skips the contract node (Studio's "edit node output" of contract with no contract in it) reached
assess with no task contract: assess called the model, then failed on the missing contract as
"internal: AttributeError: 'NoneType' object ...". A stage that reads the contract refuses such a state before
any model call, as an input fault naming the contract (graph.nodes.common.need_contract)."""

from __future__ import annotations

import pytest
from graph_scripts import make_agent

INSTRUCTION = "push the red block to the right"


def test_a_fork_past_the_contract_node_without_a_contract_is_ineligible_before_any_call(clip):
    agent, model = make_agent("full")
    config = {"configurable": {"thread_id": "no-contract"}}
    first = agent.invoke({"video": str(clip), "instruction": INSTRUCTION, "run_id": "no-contract"}, config)
    assert first["result"].status == "scored" and first["result"].T == pytest.approx(1.0)
    history = list(agent.get_state_history(config))
    before = next(h for h in history if h.next == ("observe", "contract"))
    observed = next(h for h in history if h.next == ("assess",)).values["observation"]
    forked = agent.update_state(before.config, {"observation": observed}, as_node="observe")
    forked = agent.update_state(forked, {"notes": []}, as_node="contract")
    assert agent.get_state(forked).next == ("assess",)
    assert agent.get_state(forked).values.get("contract") is None
    calls = len(model.calls)
    out = agent.invoke(None, forked)
    assert out["result"].status == "ineligible" and out["result"].reward is None
    assert [(f.kind, f.stage) for f in out["faults"]][:1] == [("input", "assess")]
    assert "task contract" in out["faults"][0].message
    assert len(model.calls) == calls  # refused before any model call
