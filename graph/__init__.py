"""The reward agent (DESIGN.md §3): a LangGraph state machine that scores robot videos.

    from graph import build_reward_agent, AgentConfig, score_video, ascore_videos, RewardResult

The errors a caller of the API catches are here too: `ResumeMismatchError` (a run resumed by an agent of another
config), `ThreadInUseError` (a new input on a thread that holds a run), `RunIdClaimed` / `RunClaimFailed` (its run id
in flight elsewhere / not claimable), `StoreError` (the trace database), `ContractFrozenError` (a fork that writes
the frozen contract again) and `SettingsError` (the endpoint's settings).

Imports are lazy (PEP 562) so `import graph` does no work and loads neither LangGraph nor tools.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["AgentConfig", "AgentTools", "ContractFrozenError", "ResumeMismatchError", "RewardResult", "RunClaimFailed",
           "RunIdClaimed", "SettingsError", "StoreError", "ThreadInUseError", "ascore_videos", "build_reward_agent",
           "score_video"]

if TYPE_CHECKING:  # pragma: no cover
    from graph.api import ascore_videos, score_video
    from graph.builder import build_reward_agent
    from graph.config import AgentConfig
    from graph.context import AgentTools
    from graph.schemas import RewardResult
    from graph.settings import SettingsError
    from graph.state import ContractFrozenError
    from graph.stores import StoreError
    from graph.thread_claims import RunClaimFailed, RunIdClaimed
    from graph.thread_guard import ResumeMismatchError, ThreadInUseError

_WHERE = {"AgentConfig": "graph.config", "AgentTools": "graph.context", "RewardResult": "graph.schemas",
          "ascore_videos": "graph.api", "score_video": "graph.api", "build_reward_agent": "graph.builder",
          "ResumeMismatchError": "graph.thread_guard", "ThreadInUseError": "graph.thread_guard",
          "RunIdClaimed": "graph.thread_claims", "RunClaimFailed": "graph.thread_claims", "StoreError": "graph.stores",
          "ContractFrozenError": "graph.state", "SettingsError": "graph.settings"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'graph' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_WHERE[name]), name)
