"""Chat completions whose shape is the server's doing, read before langchain-openai builds the AIMessage
(`ShapedChatOpenAI`, the chat model `graph.backbone.default_chat_model` builds; DESIGN.md §3 "Backbone").

- Tool-call `arguments` sent as a JSON object instead of a JSON string (some llama.cpp llama-server builds,
  older TGI): langchain-openai could not build the AIMessage ("validation error for AIMessage"), the backbone
  re-asked it (pointless: every reply of that server has this shape), then faulted the stage as invalid_reply,
  its tokens lost. Decided: such arguments are serialised to the JSON string the API specifies
  (`with_string_arguments`), so a run whose content is fine stays scorable, rather than faulted at once with a
  remedy; a fault would not fix the server, and the call the model made is unambiguous. Only values that are
  not strings are touched: `"[1,2]"`, a string that is valid JSON but not an object, is the model's mistake and
  is re-asked as before.
- A 200 with `choices: []`, or a choice without a `message` (or with `message: null`): langchain-openai and the
  openai SDK raised an IndexError or AttributeError, reported as "transport: unexpected ...". It is
  `MalformedCompletion` naming the problem (`choice_problem`); `graph.transport.not_a_completion` makes it a
  "transport" fault at once, like any other 200 that is no chat completion (not a call, never re-asked: the
  same server answers the same way). The SDK's structured-output parser trips on a null message before the
  reader below runs; `graph.transport` reads the HTTP reply it attaches with `choice_problem` too.

A plain `ChatOpenAI` passed to the backbone by the caller (`Backbone(model)`, `Backbone.from_settings(model=...)`,
`build_reward_agent(model=...)`, or assigned to `Backbone.model`) is read the same way: `shaped` makes a
`ShapedChatOpenAI` of it that shares its settings and clients. It got none of these repairs, so a run that
injected its own model against such a server faulted where the same settings without injection scored. Decided
where the issue was silent: a subclass of ChatOpenAI (the caller's own, which may read completions its own way)
and any other chat model are used as given; the repairs are about OpenAI's wire format, and a class cannot be
swapped under a caller's overrides.
"""

from __future__ import annotations

import json
from typing import Any

import openai
from langchain_core.language_models import BaseChatModel
from langchain_core.outputs import ChatResult
from langchain_openai import ChatOpenAI

_FIX = "the server (or a proxy in front of it) dropped the model's reply: see its log"


class MalformedCompletion(ValueError):
    """A 200 chat completion without a choice or a message: the server's fault, not the model's."""


def choice_problem(body: Any) -> str | None:
    """Why the chat completion `body` (a dict) holds no reply to read, or None (also when it is no completion
    at all: `choices` missing or not a list is `graph.transport`'s to report)."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list):
        return None
    if not choices:
        return f"the server answered 200 without a choice (choices: []); {_FIX}"
    for choice in choices:
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            return (f"the server answered 200 without a message in its choice ({json.dumps(choice)[:120]}); "
                    f"{_FIX}")
    return None


def with_string_arguments(body: dict) -> dict | None:
    """`body` with every tool call's `arguments` that is a JSON value but not a string serialised to its JSON
    text (a copy), or None when there is none."""
    changed = False
    choices = []
    for choice in body.get("choices") or []:
        message = choice.get("message") if isinstance(choice, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if isinstance(message, dict) and isinstance(calls, list):
            fixed = [_string_arguments(call) for call in calls]
            if any(a is not b for a, b in zip(fixed, calls, strict=True)):
                changed = True
                choice = {**choice, "message": {**message, "tool_calls": fixed}}
        choices.append(choice)
    return {**body, "choices": choices} if changed else None


def _string_arguments(call: Any) -> Any:
    function = call.get("function") if isinstance(call, dict) else None
    arguments = function.get("arguments") if isinstance(function, dict) else None
    if not isinstance(function, dict) or arguments is None or isinstance(arguments, str):
        return call
    return {**call, "function": {**function, "arguments": json.dumps(arguments)}}


class ShapedChatOpenAI(ChatOpenAI):
    """ChatOpenAI that reads the completion shapes above (module docstring) before langchain-openai does."""

    def _create_chat_result(self, response: dict | openai.BaseModel,
                            generation_info: dict | None = None) -> ChatResult:
        body = response.model_dump(warnings=False) if isinstance(response, openai.BaseModel) else response
        if (why := choice_problem(body)) is not None:
            raise MalformedCompletion(why)
        if isinstance(body, dict) and (fixed := with_string_arguments(body)) is not None:
            response = fixed  # (a parsed structured output is dropped: it has no tool calls to need this)
        return super()._create_chat_result(response, generation_info)


def shaped(model: BaseChatModel) -> BaseChatModel:
    """`model` with the repairs of `ShapedChatOpenAI` when it is a plain `ChatOpenAI` (module docstring), else
    `model` itself. The copy holds the same field values and the same openai clients (a caller's own HTTP
    client, headers, proxy and connection pool are what it sends with); the caller's instance is not changed."""
    if type(model) is not ChatOpenAI:
        return model
    fields = {name: getattr(model, name) for name in ChatOpenAI.model_fields}
    return ShapedChatOpenAI.model_construct(_fields_set=set(model.model_fields_set), **fields)
