"""Where a run keeps the RewardResult its gate returned, before LangGraph writes the final checkpoint
(`graph.api`: a trace that cannot be saved does not discard the result).

`arun_agent` puts a `GateResult` into the run's config (`configurable[GATE_SINK_KEY]`); the node wrapper
(`graph.nodes.common.make_node`) hands it any RewardResult a node returns under "result" (the gate's), as the node
returns it. It was a langchain callback handler (`on_chain_end`), and with a handler in the config langchain
dispatches a start and an end event to it for every node, model call and chain of the run: 3.4M instructions per
clip of `benchmarks/agent_instructions.py` (0.35% of the clip, ~4% of the event loop's), for one value. The key
starts with "__", and the value is no str, number or bool, so LangGraph copies it into no metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from graph.schemas import RewardResult

GATE_SINK_KEY = "__raa_gate_result"
"""The `configurable` key of a run's `GateResult`."""


class GateResult:
    """The RewardResult a node of the run returned (the gate's), or None before it has."""

    def __init__(self) -> None:
        self.result: RewardResult | None = None


def keep_result(config: Mapping[str, Any], update: Mapping[str, Any]) -> None:
    """Hand the RewardResult of a node's `update` to the run's `GateResult`, when the run has one (`arun_agent`'s
    runs; not `agent.invoke` called directly, nor LangGraph's server)."""
    sink = (config.get("configurable") or {}).get(GATE_SINK_KEY)
    if isinstance(sink, GateResult) and isinstance(result := update.get("result"), RewardResult):
        sink.result = result
