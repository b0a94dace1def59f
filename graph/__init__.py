"""The reward agent (DESIGN.md §3): a LangGraph state machine that scores robot videos.

    from graph import build_reward_agent, AgentConfig, score_video, ascore_videos, RewardResult

Imports are lazy (PEP 562) so `import graph` does no work and loads neither LangGraph nor tools.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["AgentConfig", "AgentTools", "RewardResult", "ascore_videos", "build_reward_agent", "score_video"]

if TYPE_CHECKING:  # pragma: no cover
    from graph.api import ascore_videos, score_video
    from graph.builder import build_reward_agent
    from graph.config import AgentConfig
    from graph.context import AgentTools
    from graph.schemas import RewardResult

_WHERE = {"AgentConfig": "graph.config", "AgentTools": "graph.context", "RewardResult": "graph.schemas",
          "ascore_videos": "graph.api", "score_video": "graph.api", "build_reward_agent": "graph.builder"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'graph' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_WHERE[name]), name)
