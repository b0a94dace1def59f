"""Where each node of the reward agent goes next (DESIGN.md §3): the nodes a config wires and their edges.

    START -> quality --(fault / zero)------------------------------------------------> gate
               '-> [observe] + contract (parallel) -> assess
    assess -> [inspect <-> tool_call] -> [surprise] -> [extra] -> [reflect] -> [audit <-> repair]
           -> [final_check] -> gate -> END
    preset direct: quality -> direct -> gate
    any node that records a Fault routes to gate (result ineligible)

Decision where the issue was silent: each conditional edge's route is a `RouteStep`, a bare langchain
Runnable, rather than a plain function, which LangGraph wraps in a traced runnable that opens a callback
run (configure, on_chain_start, on_chain_end) on every call. That was ~3 ms of event-loop CPU per
15-node toy run on the 2-core VM (7.4-8.9 vs 4.9-6.0 ms per `ainvoke`), with nothing to show for it: the
node the edge leaves is traced already. Routes stay conditional edges, not `Command(goto=...)` returned
by the nodes (1.2 ms cheaper still), because LangGraph's `update_state` replays a node's edges to find
what runs next, so a fork in Studio or from Python (tests/test_time_travel.py) needs them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.graph import END, START

from graph.config import ResolvedConfig
from graph.state_records import with_records

Route = Callable[[Mapping[str, Any]], str | list[str]]
"""The state after the node's writes -> the next node(s)."""


class RouteStep(Runnable[Mapping[str, Any], str | list[str]]):
    """A route as a conditional edge's path: calls `route` and nothing else (see module docstring)."""

    name = "route"

    def __init__(self, route: Route) -> None:
        self.route = route

    def invoke(self, input: Mapping[str, Any], config: RunnableConfig | None = None,
               **kwargs: Any) -> str | list[str]:
        return self.route(with_records(input)[0])  # records a fork wrote as JSON (graph.state_records)

    async def ainvoke(self, input: Mapping[str, Any], config: RunnableConfig | None = None,
                      **kwargs: Any) -> str | list[str]:
        return self.route(with_records(input)[0])


BRANCHES = ("observe", "contract")
"""Stages that run side by side after quality; assess joins them. (surprise and extra sit just before
reflect, the only stage that uses them: their work starts in quality and runs beside the model calls in
between; see graph.nodes.surprise.)"""


def expected_nodes(cfg: ResolvedConfig, *, extra: bool = False) -> list[str]:
    """Nodes the builder wires for a resolved config (in pipeline order); `extra`: the agent has extra
    evidence tools (`tools.extra`), consulted when the preset has reflect."""
    if not cfg.structured:
        return ["quality", "direct", "gate"]
    nodes = ["quality"] + (["observe"] if cfg.task_blind else []) + ["contract", "assess"]
    nodes += ["inspect", "tool_call"] if cfg.visual_verify else []
    nodes += (["surprise"] if cfg.wmreward else []) + (["extra"] if extra and cfg.reflect else [])
    nodes += ["reflect"] if cfg.reflect else []
    nodes += ["audit", "repair"] if cfg.audit else []
    nodes += ["final_check"] if cfg.failure_gate else []
    return nodes + ["gate"]


def max_supersteps(cfg: ResolvedConfig, *, extra: bool = False) -> int:
    """The most LangGraph supersteps one run of this wiring takes (pure): every stage once (observe shares its
    superstep with contract), plus the capped loops: `max_tool_rounds` inspect <-> tool_call rounds (2 each; a
    loop that stops early adds a closing inspect but has a round fewer) and `max_repair_rounds` repair -> audit
    rounds (2 each). Plan mode takes fewer (one inspect). The builder sets the agent's recursion limit from it
    (graph.builder)."""
    nodes = [n for n in expected_nodes(cfg, extra=extra) if n not in ("observe", "tool_call", "repair")]
    steps = len(nodes)
    if cfg.visual_verify:
        steps += 2 * cfg.max_tool_rounds - 1  # inspect is counted once above
    if cfg.audit:
        steps += 2 * cfg.max_repair_rounds
    return steps


def after(cfg: ResolvedConfig, node: str, *, extra: bool = False) -> str:
    """The next stage after `node` on the success path."""
    order = [n for n in expected_nodes(cfg, extra=extra) if n not in ("tool_call", "repair", *BRANCHES)]
    return order[order.index(node) + 1]


def faulted(state: Mapping[str, Any]) -> bool:
    """A fault is recorded."""
    return bool(state.get("faults"))


def node_routes(cfg: ResolvedConfig, *, extra: bool = False) -> dict[str, tuple[Route, tuple[str, ...]]]:
    """(route, possible destinations) of every node whose successor depends on the run; the other nodes
    have the static edges of `static_edges`."""
    if not cfg.structured:
        return {"quality": (lambda s: "gate" if faulted(s) or s.get("zero") else "direct", ("direct", "gate"))}
    nodes = expected_nodes(cfg, extra=extra)
    fan = [n for n in nodes if n in BRANCHES]
    routes: dict[str, tuple[Route, tuple[str, ...]]] = {
        "quality": (lambda s: "gate" if faulted(s) or s.get("zero") else list(fan), (*fan, "gate"))}

    def simple(node: str) -> tuple[Route, tuple[str, ...]]:
        nxt = after(cfg, node, extra=extra)
        return (lambda s: "gate" if faulted(s) else nxt), (nxt, "gate")

    for node in ("assess", "surprise", "extra", "reflect"):
        if node in nodes:
            routes[node] = simple(node)
    if cfg.visual_verify:
        after_inspect = after(cfg, "inspect", extra=extra)

        def route_inspect(state: Mapping[str, Any]) -> str:
            if faulted(state):
                return "gate"
            return "tool_call" if state.get("pending_calls") else after_inspect

        def route_tools(state: Mapping[str, Any]) -> str:
            if faulted(state):
                return "gate"
            return after_inspect if int(state.get("inspect_rounds", 0)) >= cfg.max_tool_rounds else "inspect"

        routes["inspect"] = route_inspect, ("tool_call", after_inspect, "gate")
        routes["tool_call"] = route_tools, ("inspect", after_inspect, "gate")
    if cfg.audit:
        after_audit = after(cfg, "audit", extra=extra)

        def route_audit(state: Mapping[str, Any]) -> str:
            if faulted(state):
                return "gate"
            audits = state.get("audits") or []  # none readable (a fork's invalid edit): repair refuses it
            clean = bool(audits) and audits[-1].clean
            return after_audit if clean or int(state.get("repair_rounds", 0)) >= cfg.max_repair_rounds \
                else "repair"

        routes["audit"] = route_audit, ("repair", after_audit, "gate")
        routes["repair"] = (lambda s: "gate" if faulted(s) else "audit"), ("audit", "gate")
    return routes


def static_edges(cfg: ResolvedConfig, *, extra: bool = False) -> list[tuple[str | list[str], str]]:
    """The graph's fixed edges: (source or joined sources, target)."""
    if not cfg.structured:
        return [(START, "quality"), ("direct", "gate"), ("gate", END)]
    fan = [n for n in expected_nodes(cfg, extra=extra) if n in BRANCHES]
    edges: list[tuple[str | list[str], str]] = [(START, "quality"), (fan if len(fan) > 1 else fan[0], "assess")]
    if cfg.failure_gate:
        edges.append(("final_check", "gate"))
    return edges + [("gate", END)]
