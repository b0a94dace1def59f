"""LangGraph Studio / `langgraph dev` entry point (named in the repository's langgraph.json).

`make_graph(config)` builds the reward agent without a checkpointer (the LangGraph server supplies its own
persistence) and without a declared context schema (the server's per-run context is its config, not the
agent's heavy objects, which the graph carries itself). The backbone endpoint comes from
`BackboneSettings.from_env()` (`RAA_BASE_URL`, `RAA_MODEL`, `RAA_API_KEY`, ...) and the evidence tools
from `ToolSettings.from_env()`, built lazily on first use, so building opens no connection and loads no
weights.

Without the endpoint variables the graph still builds: Studio draws it and reads saved runs' state history
(time travel) through it, which needs no model (it raised SettingsError, so Studio showed nothing). Its
backbone is then a `graph.no_endpoint.NoEndpointModel` with an in-memory stage cache, and a run is refused at
its entry: ineligible with one reason, "backbone: settings: ...", naming the unset variables, and no stage
runs (a reward is never made up). A set but unusable `RAA_*` value still raises SettingsError naming it.

Decisions where the issue was silent:
- The preset is taken from the run config (`{"configurable": {"preset": "no_audit"}}`, e.g. an assistant's
  configuration in Studio); default `full`. An unknown preset raises ValueError naming the valid ones.
- `build_studio_graph` is the injectable core (chat model, settings) used by tests; `make_graph` is the
  one-argument factory the LangGraph server calls.
- The server calls the factory for every run and every state read, on its event loop, where its
  blocking-call detector (blockbuster) rejects file and SQLite I/O. `make_graph` is therefore async: it
  builds in a worker thread (`asyncio.to_thread`), once per preset per server process (the settings are
  read once, like any `RAA_*` edge; restart `langgraph dev` after changing them), so runs share one stage
  cache connection and one frame cache instead of opening new ones per request. The runs themselves keep
  their file and SQLite work off the loop (`graph.cache.StageCache.aget` / `aput`, `graph.workers`).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from langchain_core.runnables import RunnableConfig


def build_studio_graph(preset: str = "full", *, model: Any = None, settings: Any = None) -> Any:
    """The compiled reward agent for `preset`, without a checkpointer."""
    from graph.builder import build_reward_agent
    from graph.no_endpoint import NoEndpointModel
    from graph.settings import BackboneSettings

    settings = settings if settings is not None else BackboneSettings.from_env()
    if model is None and not settings.configured:
        model = NoEndpointModel(reason=no_endpoint_reason(settings))
    agent = build_reward_agent(settings.agent_config(preset), model=model, settings=settings, checkpointer=False)
    # The server hands every run its `configurable` as a dict context; with RunContext declared as the
    # context schema LangGraph would build RunContext(**that dict) and fail before the first node. The
    # nodes use the agent's own context whenever the given one is not a RunContext (graph.nodes.common).
    return agent.copy(update={"context_schema": None})


def no_endpoint_reason(settings: Any) -> str:
    """Why a run of the graph built from `settings` (`BackboneSettings` without an endpoint) is ineligible:
    the unset variables, what this graph can still do, and how to get a model."""
    return ("this Studio graph was built without a backbone endpoint: it draws the agent and shows saved runs "
            "but scores nothing; set the variables below and restart `langgraph dev`. "
            + settings.describe_missing())


_GRAPHS: dict[str, Any] = {}
_GRAPHS_LOCK = threading.Lock()


def studio_graph(preset: str) -> Any:
    """The server's graph for `preset`, built on first use from the environment's settings (with or without
    an endpoint) and kept for the life of the process (a failed build, an invalid setting or an unknown
    preset, is not kept: the next request raises the same error)."""
    with _GRAPHS_LOCK:
        graph = _GRAPHS.get(preset)
        if graph is None:
            graph = _GRAPHS[preset] = build_studio_graph(preset)
        return graph


async def make_graph(config: RunnableConfig) -> Any:
    """Graph factory for `langgraph dev` (langgraph.json: "./graph/studio.py:make_graph"); the server
    passes the run's config (one argument, the documented factory signature) and awaits the result."""
    configurable = dict((config or {}).get("configurable") or {})
    return await asyncio.to_thread(studio_graph, str(configurable.get("preset") or "full"))
