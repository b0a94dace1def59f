"""Backbone usage accounting (graph.backbone; DESIGN.md §3 "Backbone"): model replies received, the image
blocks sent with them and the tokens the server reported; a stage output served from the cache counts only
in `cache_hits`."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

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

    def add(self, other: Usage) -> Usage:
        """Add `other` into this usage in place; returns self."""
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)
        return self

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def count_images(messages: list[BaseMessage]) -> int:
    """Number of image blocks (`image_url` / `image`) across the messages' content."""
    n = 0
    for m in messages:
        if isinstance(m.content, list):
            n += sum(1 for b in m.content if isinstance(b, dict) and b.get("type") in ("image_url", "image"))
    return n


def count_reply(usage: Usage, messages: list[BaseMessage], raw: AIMessage | None, completion: Any = None) -> None:
    """Count one reply received; tokens from the AIMessage, or from a raw openai `completion` (a reply the
    SDK refused before LangChain saw it)."""
    usage.calls += 1
    usage.images += count_images(messages)
    if raw is not None and raw.usage_metadata:
        usage.input_tokens += int(raw.usage_metadata.get("input_tokens", 0))
        usage.output_tokens += int(raw.usage_metadata.get("output_tokens", 0))
    elif (counted := getattr(completion, "usage", None)) is not None:
        usage.input_tokens += int(getattr(counted, "prompt_tokens", 0) or 0)
        usage.output_tokens += int(getattr(counted, "completion_tokens", 0) or 0)
