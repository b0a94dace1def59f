"""The JSON object in a model's reply text (json_mode, and function_calling replies without a tool call).

`extract_json_object` takes the first balanced `{...}` object after removing what models put around
it: markdown code fences, and a reasoning block. Decisions where the issue was silent:

- Reasoning models served without a reasoning parser return their reasoning in the content:
  `<think>...</think>` (Qwen3, DeepSeek-R1, GLM-4.1V-Thinking) or `◁think▷...◁/think▷` (Kimi-VL). Their
  chat templates often open the block in the prompt, so the reply may hold only the closing tag. The
  object is looked for after the last closing tag; reasoning routinely quotes braces ("I will answer
  {"task_success": ...}") that would otherwise be taken for the answer.
- A reply whose reasoning opens and never closes (output cut at max_tokens) has no answer: the error
  says so, instead of validating a brace the reasoning happened to contain.
- The backbone's check for a tool call left in the text (no tool parser on the server) reads only the
  text after the reasoning (`after_reasoning`): reasoning that spells out a call it is about to make
  is not one.
- `cut_at_token_limit` reads the reply's ``response_metadata["finish_reason"] == "length"`` (ChatOpenAI, and
  so vLLM and other OpenAI-compatible servers; a scripted reply can set it): a free-text answer cut there
  still reads as an answer, so the backbone does not cache it and the inspect node notes it; a structured reply
  cut there is re-asked (`graph.validation.read_reply`).
- A reply with no content whose reasoning the server split off (`reasoning_content` / `reasoning`: vLLM's reasoning
  parsers take a whole output without a closing think tag for reasoning) says so (`reasoning_only`): the empty
  reply fault read "the reply had no content" although the model had answered.
- `declined` reads the reply's `refusal` (ChatOpenAI puts the message's refusal field in
  `additional_kwargs`; the Responses API, and chat models that answer in content blocks, give a `refusal`
  block in the content, which LangChain's structured-output parsers also take for a refusal) and a
  finish_reason "content_filter": the backbone's tool rounds and json_mode calls report it as "refused" at
  once (LangChain's structured-output parser does so for the other methods).
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

CUT_HINT = "the reply was cut at the token limit before its answer was complete (raise RAA_MAX_TOKENS)"
"""What a rejected reply the server cut at the token limit (finish_reason "length") is told, and faults say."""

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)
_THINK_END = re.compile(r"</think>|◁/think▷")
_THINK_START = re.compile(r"<think>|◁think▷")


def cut_at_token_limit(reply: BaseMessage) -> bool:
    """Whether the server stopped `reply` at the output token limit (finish_reason "length")."""
    return reply.response_metadata.get("finish_reason") == "length"


def reasoning_only(reply: BaseMessage) -> str:
    """What to add to "the reply had no content" when the server split reasoning off the reply
    (`response_metadata["reasoning_chars"]`, set by `graph.completion_shape.ShapedChatOpenAI`), else ""."""
    chars = reply.response_metadata.get("reasoning_chars")
    if not isinstance(chars, int) or chars <= 0:
        return ""
    return (f", only {chars} characters of reasoning (the server's reasoning parser took the whole output for "
            "reasoning: a model that wrote no closing think tag, as when served with thinking off; check the "
            "server's --reasoning-parser and the chat template's thinking setting)")


MODEL_REFUSED = "the model refused: "
"""How a "refused" fault's message starts when the model declined (followed by its words)."""
FILTERED = "the server's content filter stopped the reply"
"""A "refused" fault's message when the server's content filter stopped the reply."""
_POLICY = ("content_policy", "content policy", "content management policy")
"""How an error status says a content policy rejected the request (OpenAI's code `content_policy_violation`, Azure
OpenAI's "content management policy")."""


def declined_answer(message: str) -> bool:
    """Whether a "refused" fault's `message` is the model's or its server's answer about the content (`declined`, a
    LangChain refusal, a content-policy rejection), which the same model gives the same request again; a "refused"
    fault is otherwise a request the server rejected for a reason not recognised (or, in rows written before it was
    "settings", a key or URL since fixed)."""
    lowered = message.lower()
    return message.startswith((MODEL_REFUSED, FILTERED)) or any(p in lowered for p in _POLICY)


def declined(reply: BaseMessage) -> str | None:
    """Why the model or the server declined to answer in `reply` (its `refusal` text, or a content-filter
    stop), or None. Such a reply has no content; it is not an empty reply to re-ask."""
    if refusal := reply.additional_kwargs.get("refusal") or _refusal_block(reply.content):
        return f"{MODEL_REFUSED}{refusal}"
    if reply.response_metadata.get("finish_reason") == "content_filter":
        return FILTERED
    return None


def _refusal_block(content: str | list) -> str | None:
    """The text of the first `refusal` block of a reply's content ("(no reason given)" when empty), or None."""
    if isinstance(content, str):
        return None
    for block in content:
        if isinstance(block, dict) and block.get("type") == "refusal":
            return str(block.get("refusal") or "(no reason given)")
    return None


def after_reasoning(text: str) -> str:
    """`text` after its last closing think tag (all of it when there is none)."""
    ends = list(_THINK_END.finditer(text))
    return text[ends[-1].end():] if ends else text


def strip_reasoning(text: str) -> str:
    """`text` after its reasoning block (the last closing think tag); ValueError for one left open."""
    if _THINK_END.search(text):
        return after_reasoning(text)
    if _THINK_START.search(text):
        raise ValueError("the reply's reasoning block (<think>) never closed, so it holds no answer; "
                         "the output was probably cut at max_tokens (raise RAA_MAX_TOKENS)")
    return text


def extract_json_object(text: str) -> str:
    """The first balanced `{...}` object in `text` that parses as JSON, after its reasoning block and code
    fences (prose before the answer may hold braces that are not JSON: "the schema {label, score}");
    ValueError if there is none."""
    stripped = _FENCE.sub("", strip_reasoning(text).strip())
    start = stripped.find("{")
    if start < 0:
        raise ValueError("the reply contains no JSON object")
    first_error: ValueError | None = None
    while start >= 0:
        end = _balanced_end(stripped, start)
        if end is None:
            break
        candidate = stripped[start:end + 1]
        try:
            json.loads(candidate)
            return candidate
        except ValueError as exc:
            first_error = first_error or exc
        start = stripped.find("{", start + 1)
    if first_error is not None:
        raise ValueError(f"the reply's JSON object is not valid JSON ({first_error})")
    raise ValueError("the reply's JSON object is not closed")


def _balanced_end(text: str, start: int) -> int | None:
    """Index of the `}` that closes the `{` at `start` (strings and escapes respected), or None."""
    depth, in_str, escape = 0, False, False
    for i in range(start, len(text)):
        ch = text[i]
        if in_str:  # the character after a backslash is escaped, whatever it is
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
    return None


# a tool call the server left in the text (no parser, or one for another format): Hermes / Qwen tags,
# Mistral's marker, or a JSON object with a name followed by its arguments
TEXT_TOOL_CALL = re.compile(r"<tool_call>|\[TOOL_CALLS\]|\"name\"\s*:\s*\"[\w.-]+\"\s*,\s*\"(?:arguments|parameters)\"\s*:")


def no_answer(text: str) -> str | None:
    """Why a final tool-round reply (no tool call) holds no answer, or None: empty, only reasoning, or a
    reasoning block left open (cut at the token limit)."""
    if not text.strip():
        return "the reply had neither content nor tool calls"
    try:
        rest = strip_reasoning(text)
    except ValueError as exc:
        return str(exc)
    return None if rest.strip() else "the reply held only reasoning, no answer after it"


def stored_reply_problem(reply: BaseMessage) -> str | None:
    """Why a tool-round reply read back from the stage cache would not pass the backbone's checks today, or
    None. A cache file outlives code: a closing reply stored before a check existed (a tool call the server
    left in the text, a reply holding only reasoning) was served on every hit, though the same reply from the
    model is re-asked or a fault and never stored. A reply with tool calls passed then as now. (A reply cut
    at the token limit cannot be told apart: the stored form has no finish_reason.)"""
    if isinstance(reply, AIMessage) and reply.tool_calls:
        return None
    if TEXT_TOOL_CALL.search(after_reasoning(reply.text)):
        return "a tool call left in the reply text (no tool parser on the server)"
    return no_answer(reply.text)


def malformed_text_call(text: str) -> str | None:
    """Why the tool call written in `text` is not valid JSON, or None when it is. A server with a tool parser
    hands back a call whose JSON does not parse as plain text (vLLM's Hermes parser does): that reply is the
    model's mistake, to re-ask, not a server without a parser."""
    found = TEXT_TOOL_CALL.search(text)
    if found is None:
        return None
    if found.group(0) == "<tool_call>":
        body = text[found.end():].split("</tool_call>", 1)[0]
    elif found.group(0) == "[TOOL_CALLS]":
        body = text[found.end():]
    else:
        body = text[max(text.rfind("{", 0, found.start()), 0):]  # from the object's brace (or the start)
    try:
        json.JSONDecoder().raw_decode(body.strip())
    except ValueError as exc:
        return f"the tool call in your reply is not valid JSON ({exc})"
    return None


def schema_mismatch(fields: set[str] | frozenset[str], obj: Any) -> str | None:
    """Why the JSON object `obj` of a reply is not an answer with the schema's top-level `fields`, or None.

    The records ignore unknown keys and give most fields defaults, so a reply that wrapped its answer
    (`{"AuditReport": {...}}`), echoed the schema, or misspelled a field (`"judgements"`) validated as an
    empty record: a clean audit, or an assessment without judgments (T = 0). Rejected (and re-asked): an
    object with keys but none of the schema's fields, and an unknown key that is a near spelling of a
    missing field. Other extra keys (a model's own "notes") are ignored, as before."""
    if not isinstance(obj, dict) or not obj:
        return None
    unknown = [k for k in obj if k not in fields]
    missing = sorted(f for f in fields if f not in obj)
    if not unknown or not missing:
        return None
    if len(unknown) == len(obj):
        return (f"none of the schema's fields at the top level (got {unknown[:5]}): write the object itself, "
                f"with its fields ({', '.join(sorted(fields))}) at the top level")
    near = {k: close[0] for k in unknown if (close := difflib.get_close_matches(k, missing, n=1, cutoff=0.8))}
    if near:
        return "misspelled field(s): " + ", ".join(f"{k!r} should be {v!r}" for k, v in near.items())
    return None
