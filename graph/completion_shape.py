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
- Message content as a list of content parts (`[{"type": "text", "text": "{..."}]`) in a json_schema reply: the
  openai SDK validated the list itself against the schema ("JSON input should be string"), so every reply of such
  a server was re-asked and the stage faulted. Such a reply is read as string content is: its text parts joined
  (`with_text_content`), validated against the schema as the SDK validates a string (a reply that fails is
  `ContentPartsInvalid`, re-asked with the schema's error), and a `refusal` part is the message's refusal (the
  stage is "refused"). Other methods and tool rounds read content parts already (LangChain joins their text).
- Reasoning the server split off a message (`reasoning_content` / `reasoning`), which langchain-openai drops: its
  length is kept as `response_metadata["reasoning_chars"]`, so a reply left without content by a reasoning parser
  that took the whole answer says so (`graph.replies.reasoning_only`).

A plain `ChatOpenAI` passed to the backbone by the caller (`Backbone(model)`, `Backbone.from_settings(model=...)`,
`build_reward_agent(model=...)`, or assigned to `Backbone.model`) is read the same way: `shaped` makes a
`ShapedChatOpenAI` of it that shares its settings and clients. It got none of these repairs, so a run that
injected its own model against such a server faulted where the same settings without injection scored. Decided
where the issue was silent: a subclass of ChatOpenAI (the caller's own, which may read completions its own way)
and any other chat model are used as given; the repairs are about OpenAI's wire format, and a class cannot be
swapped under a caller's overrides (no test by class name or attribute either: a subclass that wants the repairs
subclasses `ShapedChatOpenAI` instead).

Whole completions: the repairs, the reasoning length and the token counts read the whole completion, which a
streamed reply never passes through (`_create_chat_result`, `_agenerate`), and langchain-openai asks a base URL of
one's own for no stream usage (tokens 0). A streaming callback handler switched every call to the streaming API:
LangGraph's `stream_mode="messages"` attaches one (langgraph dev / Studio, `agent.astream`), so a run scored
differently streamed than invoked. `ShapedChatOpenAI` therefore does not stream (`disable_streaming` defaults to
True; the message stream gets each reply whole, when it ends), nor does the copy `shaped` makes unless the caller
set `disable_streaming`. A ChatOpenAI set to stream (`streaming=True`: a server that only streams) is used as
given, none of the repairs applying to it; pass `stream_usage=True` for its token counts.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import openai
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field, ValidationError

from graph.usage import http_response_types

_FIX = "the server (or a proxy in front of it) dropped the model's reply: see its log"


class MalformedCompletion(ValueError):
    """A 200 chat completion without a choice or a message: the server's fault, not the model's."""


class ContentPartsInvalid(ValueError):
    """A structured reply sent as content parts whose text fails the schema (the model's mistake: re-asked);
    `response` is the HTTP reply, for its token usage (as langchain-openai attaches it to the SDK's error)."""

    def __init__(self, message: str, response: Any) -> None:
        super().__init__(message)
        self.response = response


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


def with_text_content(body: dict) -> dict | None:
    """`body` with every message content that is a list of content parts made a string, its text parts joined, and
    its first `refusal` part the message's `refusal` when it has none (a copy); None when no content is a list."""
    changed = False
    choices = []
    for choice in body.get("choices") or []:
        message = choice.get("message") if isinstance(choice, dict) else None
        parts = message.get("content") if isinstance(message, dict) else None
        if isinstance(message, dict) and isinstance(parts, list):
            changed = True
            text = "".join(str(p.get("text") or "") for p in parts if isinstance(p, dict) and p.get("type") == "text")
            refusals = [str(p.get("refusal") or "(no reason given)") for p in parts
                        if isinstance(p, dict) and p.get("type") == "refusal"]
            refusal = message.get("refusal") or (refusals[0] if refusals else None)
            choice = {**choice, "message": {**message, "content": text or None, "refusal": refusal}}
        choices.append(choice)
    return {**body, "choices": choices} if changed else None


def reasoning_chars(body: Any) -> list[int]:
    """Per choice of the completion `body`, the characters of reasoning the server split off its message
    (`reasoning_content`, or `reasoning` as newer vLLM names it; langchain-openai drops both), 0 for none."""
    choices = body.get("choices") if isinstance(body, dict) else None
    out = []
    for choice in choices if isinstance(choices, list) else []:
        message = choice.get("message") if isinstance(choice, dict) else None
        text = (message.get("reasoning_content") or message.get("reasoning")) if isinstance(message, dict) else None
        out.append(len(text) if isinstance(text, str) else 0)
    return out


def reply_text(response: Any) -> str:
    """The text of the first choice's message in the 2xx HTTP `response` (content parts joined), "" for none: a
    reply the openai SDK rejected inside the call (json_schema), for the re-ask to show the model."""
    body = _http_body(response)
    if not isinstance(body, dict) or choice_problem(body) is not None:
        return ""
    choices = (with_text_content(body) or body).get("choices")
    content = choices[0]["message"].get("content") if isinstance(choices, list) and choices else None
    return content if isinstance(content, str) else ""


def completion_text(completion: Any) -> str:
    """The content of the first choice of an openai `ChatCompletion` the SDK refused (cut at the token limit: its
    LengthFinishReasonError), "" for none: for the re-ask to show the model what it wrote."""
    choices = completion.choices if isinstance(completion, openai.types.chat.ChatCompletion) else []
    content = choices[0].message.content if choices else None
    return content if isinstance(content, str) else ""


def _http_body(response: Any) -> Any:
    """The JSON body of a 2xx HTTP `response` (httpx's or httpx2's), else None."""
    if not isinstance(response, http_response_types()) or not response.is_success:
        return None
    try:
        return json.loads(response.content)
    except ValueError:
        return None


def _string_arguments(call: Any) -> Any:
    function = call.get("function") if isinstance(call, dict) else None
    arguments = function.get("arguments") if isinstance(function, dict) else None
    if not isinstance(function, dict) or arguments is None or isinstance(arguments, str):
        return call
    return {**call, "function": {**function, "arguments": json.dumps(arguments)}}


class ShapedChatOpenAI(ChatOpenAI):
    """ChatOpenAI that reads the completion shapes above (module docstring) before langchain-openai does, from
    whole completions: it does not stream unless told to (`disable_streaming`)."""

    disable_streaming: bool | Literal["tool_calling"] = True
    asked_temperature: float | None = Field(default=None, exclude=True)
    """The temperature `graph.backbone.default_chat_model` asked for (RAA_TEMPERATURE), sent or not: langchain-openai
    sends none for a gpt-5 model (it takes only its default), and the stage keys and the temperature a run records
    (`graph.model_request.requested`) are the settings' there, as they were before the request was read."""

    def _create_chat_result(self, response: dict | openai.BaseModel,
                            generation_info: dict | None = None) -> ChatResult:
        body = response.model_dump(warnings=False) if isinstance(response, openai.BaseModel) else response
        if (why := choice_problem(body)) is not None:
            raise MalformedCompletion(why)
        if isinstance(body, dict) and (fixed := with_string_arguments(body)) is not None:
            response = fixed  # (a parsed structured output is dropped: it has no tool calls to need this)
        result = super()._create_chat_result(response, generation_info)
        for generation, chars in zip(result.generations, reasoning_chars(body), strict=False):
            if chars:
                generation.message.response_metadata["reasoning_chars"] = chars
        return result

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        try:
            return super()._generate(messages, stop, run_manager, **kwargs)
        except ValidationError as exc:
            return self._from_content_parts(exc, kwargs.get("response_format"))

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        try:
            return await super()._agenerate(messages, stop, run_manager, **kwargs)
        except ValidationError as exc:
            return self._from_content_parts(exc, kwargs.get("response_format"))

    def _from_content_parts(self, exc: ValidationError, schema: Any) -> ChatResult:
        """The result of a json_schema reply the openai SDK failed to validate because its content was a list of
        content parts (module docstring); `exc` raised again for any other."""
        response = getattr(exc, "response", None)  # langchain-openai attaches the HTTP reply to the SDK's error
        body = _http_body(response)
        fixed = with_text_content(body) if isinstance(body, dict) else None
        if fixed is None or not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            raise exc
        if (why := choice_problem(fixed)) is not None:
            raise MalformedCompletion(why) from exc
        message = fixed["choices"][0]["message"]
        parsed = None
        if message.get("content") and not message.get("refusal"):
            try:
                parsed = schema.model_validate_json(message["content"])
            except ValidationError as bad:
                raise ContentPartsInvalid(str(bad), response) from None
        result = self._create_chat_result(fixed)
        if parsed is not None:
            result.generations[0].message.additional_kwargs["parsed"] = parsed
        return result


def shaped(model: BaseChatModel) -> BaseChatModel:
    """`model` with the repairs of `ShapedChatOpenAI` when it is a plain `ChatOpenAI` not set to stream (module
    docstring), else `model` itself. The copy holds the same field values (but `disable_streaming`, unless the
    caller set it) and the same openai clients (a caller's own HTTP client, headers, proxy and connection pool
    are what it sends with); the caller's instance is not changed."""
    if type(model) is not ChatOpenAI or model.streaming:
        return model
    fields = {name: getattr(model, name) for name in ChatOpenAI.model_fields}
    if "disable_streaming" not in model.model_fields_set:
        del fields["disable_streaming"]  # ShapedChatOpenAI's default: whole completions (module docstring)
    return ShapedChatOpenAI.model_construct(_fields_set=set(model.model_fields_set), **fields)
