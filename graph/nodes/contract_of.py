"""The state's task contract for the stages that judge against it (assess, inspect, reflect, audit, repair,
final_check). The graph reaches them only after the contract node wrote one, but a time-travel fork can replay
the contract node's output without a contract (Studio's "edit node output"): assess then called the model and
failed on None as "internal: AttributeError". `need_contract` refuses such a state as an input fault of the
stage, before any model call."""

from __future__ import annotations

from graph.nodes.common import InputFault
from graph.schemas import TaskContract
from graph.state import AgentState


def need_contract(state: AgentState) -> TaskContract:
    """The state's task contract; an InputFault when it has none (module docstring)."""
    contract = state.get("contract")
    if contract is None:
        raise InputFault("the state has no task contract (a fork that replayed the contract node without one?): "
                         "nothing to judge the clip against")
    return contract
