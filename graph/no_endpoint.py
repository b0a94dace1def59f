"""The stand-in backbone model of an agent built without backbone endpoint settings.

The LangGraph Studio graph (`graph/studio.py`) must build without `RAA_BASE_URL` / `RAA_MODEL` / `RAA_API_KEY`:
Studio draws the graph and reads saved runs' checkpoints (time travel) through it, which needs no model. Its
backbone's model is then a `NoEndpointModel` carrying why there is none (the unset variables). A run of such an
agent is refused at its entry (`graph.nodes.common.make_node`: a Fault of stage "backbone", kind "settings"): it
is ineligible with that reason, and no stage runs (no frame is decoded, no evidence tool loads), as a run with a
refused context. A reward is never made up for it.

The model itself answers every call with `NoEndpointError`, so a call that reached it anyway would still end in a
fault at once (kind "transport", naming the unset variables), never in an answer. Not a SettingsError: that is a
ValueError, which the backbone takes for a reply that failed validation and re-asks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable


class NoEndpointError(RuntimeError):
    """A call of a `NoEndpointModel`; the message says why there is no model."""


class NoEndpointModel(BaseChatModel):
    """A chat model that is not there: every call raises `NoEndpointError(reason)`."""

    reason: str
    """Why there is no model: the unset settings and how to set them."""

    @property
    def _llm_type(self) -> str:
        return "no-endpoint"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        raise NoEndpointError(self.reason)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable:
        return self  # every call fails anyway; binding must not, so the backbone can build its runnables


def missing_endpoint(model: object) -> str | None:
    """Why a backbone with chat model `model` cannot run (a `NoEndpointModel`'s reason), else None."""
    return model.reason if isinstance(model, NoEndpointModel) else None

