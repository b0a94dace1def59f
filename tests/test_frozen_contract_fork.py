"""The task contract stays frozen in a fork: LangGraph's `Overwrite` (and its JSON forms, which the LangGraph
server passes on from Studio or `client.threads.update_state`) bypasses a channel's reducer, so a fork could
replace the frozen contract after assess had judged the old one (DESIGN.md §3: "any later write is an error")."""

from __future__ import annotations

import pytest
from graph_scripts import CONTRACT, make_agent
from langgraph.types import Overwrite

from graph.schemas import TaskContract
from graph.state import ContractFrozenError

INSTRUCTION = "push the red block to the right"
OTHER = {"requirements": [{"id": "R9", "kind": "outcome", "text": "something else", "essential": True}]}


@pytest.mark.parametrize("write", [Overwrite(OTHER), {"__overwrite__": OTHER},
                                   {"type": "__overwrite__", "value": OTHER}], ids=["typed", "sentinel", "json"])
def test_a_fork_cannot_overwrite_the_frozen_contract(clip, write):
    agent, _ = make_agent("full")
    config = {"configurable": {"thread_id": "frozen-fork"}}
    agent.invoke({"video": str(clip), "instruction": INSTRUCTION, "run_id": "frozen-fork"}, config)
    before_audit = next(h for h in agent.get_state_history(config) if h.next == ("audit",))
    with pytest.raises(ContractFrozenError):
        agent.update_state(before_audit.config, {"contract": write})
    assert [r.id for r in agent.get_state(config).values["contract"].requirements] == ["R1", "R2", "R3"]


def test_the_contract_can_still_be_forked_where_it_is_first_written(clip):
    """Forking the contract node's own output (before any contract exists) stays possible, Overwrite or not."""
    agent, _ = make_agent("full")
    config = {"configurable": {"thread_id": "contract-fork"}}
    agent.invoke({"video": str(clip), "instruction": INSTRUCTION, "run_id": "contract-fork"}, config)
    before = next(h for h in agent.get_state_history(config) if h.next == ("observe", "contract"))
    contract = TaskContract.model_validate(CONTRACT)
    forked = agent.update_state(before.config, {"contract": Overwrite(contract)}, as_node="contract")
    assert [r.id for r in agent.get_state(forked).values["contract"].requirements] == ["R1", "R2", "R3"]
