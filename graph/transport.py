"""Which model-call failures are worth retrying (graph.backbone's transport policy, DESIGN.md §3 "Backbone")."""

from __future__ import annotations

import httpx
import openai
from langchain_core.exceptions import ModelError

_STALE_LOOP = ("Event loop is closed", "bound to a different event loop", "attached to a different loop")
"""What a pooled keep-alive connection opened on another, or a finished, event loop raises when reused
(langchain-openai shares one async HTTP client process-wide: langchain-ai/langchain#35783). The client
drops that connection, so the retry opens a new one. See graph/bridge.py."""


def is_transient(exc: BaseException) -> bool:
    """True for transport errors worth retrying (timeouts, connection errors, 408, 429, 5xx but 501 and 505,
    which say the server cannot serve such a request at all, a stale pooled connection)."""
    if isinstance(exc, openai.APIStatusError):
        return (exc.status_code >= 500 and exc.status_code not in (501, 505)) or exc.status_code in (408, 429)
    if isinstance(exc, openai.APIConnectionError | openai.APITimeoutError | openai.RateLimitError
                  | openai.InternalServerError | httpx.TimeoutException | httpx.TransportError | TimeoutError):
        return True
    if isinstance(exc, RuntimeError) and any(m in str(exc) for m in _STALE_LOOP):
        return True
    return isinstance(exc, ModelError) and type(exc).is_retryable


def is_timeout(exc: BaseException) -> bool:
    """True for a timeout (reported as kind "timeout" once the retries are spent)."""
    return isinstance(exc, openai.APITimeoutError | httpx.TimeoutException | TimeoutError)
