"""Tool rounds of the backbone (`Backbone.atool_round`, the inspect loop's model calls; DESIGN.md §3 "Backbone"):
one reply of the chat model bound to tools, tool calls or a final text, re-asked at most `schema_retries` times
(the rejected reply shown back, then why: `graph.tool_replies.reask_tool_round`), through the backbone's transport
retries (`Backbone.invoke`), its stage-output cache and its shared flights.

Decisions where the issue was silent:
- A reply is used, re-asked or a fault at once as `graph.tool_replies.check_tool_reply` says (a refusal,
  unparsable call arguments, a tool call left in the text by a server without a tool parser, a final reply
  without an answer).
- A reply the server cut at the token limit (finish_reason "length": `graph.replies.cut_at_token_limit`) is
  returned (its calls run when all parsed: `graph.tool_replies`) but never cached: a free-text final answer cut
  mid-sentence passes every check, and the cap is not in the stage key (graph/cache.py), so a rerun with a higher
  RAA_MAX_TOKENS was served the cut text. The inspect node notes the cut answer.
- A stored reply today's checks reject (written before a check: `graph.replies.stored_reply_problem`) is a cache
  miss, asked again.
- A rejection saying the server does not serve tool calls is a "settings" fault from `Backbone.invoke`, naming how
  to serve or avoid them (`graph.setup_rejections`: read with the request sent, its tools too where the error has
  no body to read, so a 400 that merely names a tool, a content policy or a malformed tool message, stays
  "refused"; it was any 400 whose text held "tool"); so is a
  chat model that cannot bind tools, before any call (`graph.tool_replies.unsupported`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from graph.backbone_fault import BackboneFault
from graph.cache import encode_tool_reply, lookup, store
from graph.replies import cut_at_token_limit
from graph.tool_replies import (
    PLAN_REMEDY,
    check_tool_reply,
    checked_tool_reply,
    reask_tool_round,
    unsupported,
)
from graph.usage import Usage
from graph.validation import InvalidReply, ReplyFault, excerpt

if TYPE_CHECKING:  # pragma: no cover
    from graph.backbone import Backbone


async def tool_round(backbone: Backbone, stage: str, messages: list[BaseMessage], tools: Sequence[BaseTool | dict],
                     usage: Usage) -> AIMessage:
    """One reply of `backbone`'s model bound to `tools` (tool calls or a final text), from its cache when it has
    one; raises BackboneFault."""
    specs = [convert_to_openai_tool(t) for t in tools]
    if (cache := backbone.cache) is None:
        return await _asked(backbone, stage, messages, tools, specs, usage)
    key = backbone.key_of(stage, messages, method="tools", tools=specs)

    async def compute() -> AIMessage:
        cached = await lookup(cache, key, checked_tool_reply, stage)
        if cached is not None:
            usage.cache_hits += 1
            return cached
        reply = await _asked(backbone, stage, messages, tools, specs, usage)
        if cut_at_token_limit(reply):  # a later run with a higher cap must not be served the cut reply
            return reply
        await store(cache, key, encode_tool_reply(reply), stage)
        return reply

    return await backbone.shared(cache, stage, key, compute, usage)


async def _asked(backbone: Backbone, stage: str, messages: list[BaseMessage], tools: Sequence[BaseTool | dict],
                 specs: list[dict], usage: Usage) -> AIMessage:
    """The model's first usable reply, re-asked at most `schema_retries` times (module docstring); `specs`: the
    tools as a chat-completions body sends them, what a rejection is read against (`Backbone.invoke`'s `parts`)."""
    try:
        bound = backbone.model.bind_tools(tools)
    except NotImplementedError as exc:
        raise BackboneFault(stage, "settings", unsupported(backbone.model, "call tools", exc, PLAN_REMEDY)) from exc
    convo = list(messages)
    last: InvalidReply | None = None
    for _ in range(backbone.schema_retries + 1):
        try:
            reply = await backbone.invoke(stage, bound, convo, usage, {"tools": specs})
        except InvalidReply as bad:
            last = bad
        else:
            try:
                check_tool_reply(reply)
                return reply
            except InvalidReply as bad:
                last = bad
            except ReplyFault as fault:
                raise BackboneFault(stage, fault.kind, fault.message) from None
        convo = convo + reask_tool_round(last)
    assert last is not None
    raise BackboneFault(stage, last.kind, f"{backbone.schema_retries + 1} tool-round replies failed; "
                        f"last: {excerpt(last.message)}")
