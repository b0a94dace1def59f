"""LangGraph Studio / `langgraph dev` entry point (named in the repository's langgraph.json).

`make_graph(config)` builds the reward agent without a checkpointer (the LangGraph server supplies its own
persistence). The backbone endpoint comes from `BackboneSettings.from_env()` (`RAA_BASE_URL`, `RAA_MODEL`,
`RAA_API_KEY`, ...) and the evidence tools from `ToolSettings.from_env()`, built lazily on first use, so
building opens no connection and loads no weights.

Decisions where the issue was silent:
- The preset is taken from the run config (`{"configurable": {"preset": "no_audit"}}`, e.g. an assistant's
  configuration in Studio); default `full`. An unknown preset raises ValueError naming the valid ones.
- `build_studio_graph` is the injectable core (chat model, settings) used by tests; `make_graph` is the
  one-argument factory the LangGraph server calls.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig


def build_studio_graph(preset: str = "full", *, model: Any = None, settings: Any = None) -> Any:
    """The compiled reward agent for `preset`, without a checkpointer."""
    from graph.builder import build_reward_agent
    from graph.settings import BackboneSettings

    settings = settings if settings is not None else BackboneSettings.from_env()
    if model is None and not settings.configured:
        from graph.settings import SettingsError

        raise SettingsError(settings.describe_missing())
    return build_reward_agent(settings.agent_config(preset), model=model, settings=settings, checkpointer=False)


def make_graph(config: RunnableConfig) -> Any:
    """Graph factory for `langgraph dev` (langgraph.json: "./graph/studio.py:make_graph"); the server
    passes the run's config (one argument, the documented factory signature)."""
    configurable = dict((config or {}).get("configurable") or {})
    return build_studio_graph(str(configurable.get("preset") or "full"))
