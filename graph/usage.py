"""Backbone usage accounting (graph.backbone; DESIGN.md §3 "Backbone"): model replies received, the image
blocks sent with them and the tokens the server reported, and every request sent (`attempts`: also those that
brought no reply); a stage output served from the cache counts only in `cache_hits`."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import httpx
from langchain_core.messages import AIMessage, BaseMessage


@dataclass
class Usage:
    """Backbone usage of one run."""

    calls: int = 0
    """Model replies received."""
    images: int = 0
    """Image blocks sent in those calls."""
    input_tokens: int = 0
    """Prompt tokens reported by the server."""
    output_tokens: int = 0
    """Completion tokens reported by the server."""
    cache_hits: int = 0
    """Stage outputs served from the stage cache (no model call)."""
    attempts: int = 0
    """Requests sent to the model, a reply or not: `calls` plus those that timed out or ended in a transport or
    status error (retried or not). A paid API may bill one it answered after the client's timeout, whose tokens
    are unknown; a request the client could not build or send is none."""

    def add(self, other: Usage) -> Usage:
        """Add `other` into this usage in place; returns self."""
        for name in USAGE_KEYS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        return self

    def as_dict(self) -> dict[str, int]:
        """The counters by field name, in field order (what `dataclasses.asdict` gave, without its
        recursive deep copy: every node calls this once on the event loop, and the fields are ints)."""
        return {name: getattr(self, name) for name in USAGE_KEYS}


USAGE_KEYS = tuple(f.name for f in fields(Usage))
"""The usage figures' keys, in field order: those of `Usage.as_dict`, a result's ``usage`` and an eval row's."""


def count_images(messages: list[BaseMessage]) -> int:
    """Number of image blocks (`image_url` / `image`) across the messages' content."""
    n = 0
    for m in messages:
        if isinstance(m.content, list):
            n += sum(1 for b in m.content if isinstance(b, dict) and b.get("type") in ("image_url", "image"))
    return n


def count_reply(usage: Usage, messages: list[BaseMessage], raw: AIMessage | None, completion: Any = None,
                response: Any = None) -> None:
    """Count one reply received; tokens from the AIMessage, else from a raw openai `completion` (a reply the
    SDK refused before LangChain saw it), else from the `usage` of the HTTP `response` ChatOpenAI attached to
    an error raised while parsing the reply (json_schema: the SDK validates inside the call)."""
    usage.calls += 1
    usage.images += count_images(messages)
    if raw is not None and raw.usage_metadata:
        usage.input_tokens += int(raw.usage_metadata.get("input_tokens", 0))
        usage.output_tokens += int(raw.usage_metadata.get("output_tokens", 0))
    elif (counted := getattr(completion, "usage", None)) is not None:
        usage.input_tokens += int(getattr(counted, "prompt_tokens", 0) or 0)
        usage.output_tokens += int(getattr(counted, "completion_tokens", 0) or 0)
    elif (tokens := response_tokens(response)) is not None:
        usage.input_tokens += tokens[0]
        usage.output_tokens += tokens[1]


def http_response_types() -> tuple[type[Any], ...]:
    """The HTTP response classes a client can attach: httpx's, and httpx2's (openai >= 3 sends with it)."""
    try:
        import httpx2
    except ImportError:
        return (httpx.Response,)
    return (httpx.Response, httpx2.Response)


def response_tokens(response: Any) -> tuple[int, int] | None:
    """(prompt, completion) tokens of an OpenAI chat-completion HTTP `response`'s `usage`, or None."""
    if not isinstance(response, http_response_types()):
        return None
    try:
        body = response.json()
    except ValueError:  # not JSON (or not read)
        return None
    counted = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(counted, dict):
        return None
    prompt, completion = counted.get("prompt_tokens"), counted.get("completion_tokens")
    return _tokens(prompt), _tokens(completion)


def _tokens(value: Any) -> int:
    """A token count from a reply's JSON (0 when it is not an integer)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
