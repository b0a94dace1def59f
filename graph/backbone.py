"""Backbone calls of the reward agent: structured stage outputs and tool-calling rounds (graph/tool_rounds.py)
with a bounded retry policy, usage accounting and the stage-output cache (DESIGN.md §3 "Backbone", "Faults").

`Backbone` wraps any LangChain chat model. Structured methods:
- `json_schema` / `function_calling`: `model.with_structured_output(schema, method=..., include_raw=True)`;
- `json_mode`: `model.bind(response_format={"type": "json_object"})`, then the first JSON object of the
  reply (code fences and a reasoning block stripped: `graph.replies`) is validated with pydantic.
A reply that fails validation (or is empty) is re-asked at most `schema_retries` times: the rejected reply
appended as an AIMessage (its text, or its tool call's arguments; also a json_schema reply the openai SDK
rejected inside the call, read from the HTTP reply), then the error as a HumanMessage (`graph.validation.reask`);
transport errors are retried with tenacity (exponential backoff with jitter, at most `max_retries` retries).
Whatever cannot be recovered raises `BackboneFault(stage, kind, message)`; the caller records it as a Fault and
the run's result is ineligible. There is no fallback answer.

Decisions where the issue was silent:
- Every attempt is also bounded by `asyncio.wait_for(timeout_s)` so a model without its own timeout
  (e.g. a scripted one) cannot hang a run; a timeout is retried like other transport errors and, once
  the retries are spent, gives kind "timeout" (other exhausted transport errors give "transport").
- Retryable: openai.APITimeoutError, APIConnectionError, any APIStatusError with status 408, 409, 429 (but
  OpenAI's for an account without credit, "settings" as a 402 is: `graph.transport.no_credit`)
  or >= 500 but 501, 505 and one the same request meets again (`graph.transport.answered_alike`) (or
  the server's `x-should-retry` header, which decides the retry only: the kind once the tries end is the error's,
  `graph.transport.transient_error`; `Retry-After` paces the wait: graph/transport.py), httpx or httpx2
  (openai >= 3) timeouts/transport errors, TimeoutError, ConnectionError, LangChain `ModelError`s flagged
  `is_retryable`, and the RuntimeError of a pooled connection left over from another event loop (`_STALE_LOOP`).
  A 401, 403 or 404 (LangChain's `ModelAuthenticationError`, `ModelPermissionDeniedError`, `ModelNotFoundError`
  from another chat model) gives kind "settings" at once,
  naming the setting to fix (`graph.transport.settings_problem`: the API key, the model name, a base URL without
  `/v1`): an outage of the machinery (`graph.schemas.OUTAGE_FAULTS`), not the model's answer about the clip, as
  kind "refused" read (the trainer counted an expired key as clips the agent could not judge). So does a 4xx
  for a request over a limit of the server's setup (a body over its or a reverse proxy's size limit, a 413; more
  images than vLLM's `--limit-mm-per-prompt`; more tokens than the model's context, LangChain's
  `ContextOverflowError`: `graph.transport.limit_kind`), naming what to
  change on the server and in the client, a 4xx saying the server or model does not take a part the request
  carried (structured output, tool calls, images: `graph.setup_rejections.unsupported_fix`, naming the method, the
  inspect mode or the model), and a 501 or 505 (a request the server does not implement at all: these were
  "refused"). Other status errors (400/422: a content policy, a request the server
  rejects) and model refusals give kind "refused" at once. Any other exception from the model is "transport" with
  its type in the message (the run becomes ineligible instead of crashing). A UnicodeEncodeError (httpx
  cannot put a non-ASCII API key in a header) is raised before any request leaves: kind "transport" at
  once, no call counted (it is a ValueError, and was taken for a reply that failed validation, re-asked); so
  is a ValueError LangChain raises while it prepares the request (`graph.transport.request_not_built`), and any
  ValueError raised with no reply to read (a chat model's own check of its request or parameters): only one the
  HTTP reply came back with, or raised reading a completion (`graph.transport.reply_came_back`), is a reply.
- A 200 that is not an OpenAI chat completion (a web page, a server root without /v1: once an "unexpected
  AttributeError" or re-asked), or one without a choice or a message, is kind "transport" at once, not a call
  (`graph.transport.not_a_completion`). Tool-call arguments sent as an object are read (`graph.completion_shape`),
  also with a plain ChatOpenAI the caller passed in (`Backbone.model` shapes it).
- With json_schema, langchain-openai validates inside the model call, so a malformed/schema-violating
  reply surfaces as a pydantic ValidationError there; it is handled as an invalid reply (re-asked).
- With function_calling, a reply without a tool call but with a JSON object as content is accepted if
  it validates (servers without a tool parser); otherwise it is an invalid reply.
- json_mode appends one HumanMessage with the JSON schema (the server cannot see it otherwise).
- Tool-round replies (used, re-asked or a fault; cut at the token limit; stored ones): graph/tool_rounds.py.
- A reply the openai SDK refuses while parsing structured output (cut at max_tokens: LengthFinishReasonError)
  is an invalid reply with the RAA_MAX_TOKENS hint (counted, with its tokens), not a transport error (re-asked as
  any other, its text shown back, and told to write a shorter answer: `graph.validation.SHORTER`); a
  content-filter stop is "refused". Any other structured reply the server marks cut (finish_reason "length") is
  the same invalid reply, even when what it holds validates (function_calling's tool call closed before the cut,
  any method's from another chat model: `graph.validation.read_reply`): it was taken there, an unfinished answer.
- A structured reply the model or server declined (`graph.replies.declined`: a refusal, a refusal content part,
  a content-filter stop) is "refused" at once with every method and chat model: only langchain-openai's parsers
  said so for json_schema and function_calling; another chat model's was re-asked as an empty reply.
- A chat model that cannot bind tools or give structured output with the method (LangChain's NotImplementedError,
  raised without a message for tools: an "internal" fault reading "NotImplementedError: ") is kind "settings",
  naming the model and the setting that avoids the need (`graph.tool_replies.unsupported`); no call is made.
- Concurrent identical stage calls share one flight: waiters take the holder's output or fault (graph/flights.py).
- A stage output the cache cannot store (its SQLite file locked by another process, a full disk) is still
  returned, and one it cannot read is a miss (`graph.cache.lookup`): caching is best effort.
- Usage (`graph.usage`): `calls` counts model replies received (an attempt that ended in a transport
  error is not a call); `attempts` counts requests sent, a reply or not (a timeout, a 5xx or 429, a page that is
  no completion: a paid API may bill a request it answered after the client's timeout), not one the client could
  not build or send; `images` counts image blocks in the messages of those calls; tokens come from
  `AIMessage.usage_metadata`, or for a reply rejected inside the call (json_schema) from the error's
  HTTP reply; a cache hit counts in `cache_hits` only.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, TypeVar

import openai
from langchain_core.exceptions import ModelError, ModelRefusalError
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, SecretStr, ValidationError
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

# BackboneFault is re-exported: graph.backbone is its public home (graph/backbone_fault.py: shared with tool rounds)
from graph.backbone_fault import BackboneFault as BackboneFault
from graph.backbone_identity import BackboneIdentity
from graph.bridge import run_sync
from graph.cache import StageCache, encode_output, lookup, store
from graph.completion_shape import ShapedChatOpenAI, completion_text, reply_text
from graph.flights import FlightFailed
from graph.replies import CUT_HINT, FILTERED, MODEL_REFUSED
from graph.server_words import clause_joined, quoted_words
from graph.settings import BackboneSettings, SettingsError
from graph.setup_rejections import Sent, sent_request, structured_parts
from graph.tool_replies import STRUCTURED_REMEDY, unsupported
from graph.tool_rounds import tool_round
from graph.transport import (
    BACKBONE_NAMES,
    EndpointNames,
    PacedWait,
    connection_hint,
    is_timeout,
    is_transient,
    not_a_completion,
    reply_came_back,
    request_not_built,
    settings_problem,
    transient_error,
)
from graph.usage import Usage, count_reply
from graph.usage import count_images as count_images  # re-exported (its home before graph/usage.py)
from graph.validation import ERR_CHARS as _ERR_CHARS
from graph.validation import InvalidReply, ReplyFault, decode_stored, excerpt, read_reply, reask

_Out = TypeVar("_Out", bound=BaseModel)  # a stage output: a schema instance or an AIMessage (one too)


def default_chat_model(settings: BackboneSettings) -> ChatOpenAI:
    """ChatOpenAI for the endpoint (opens no connection; retries are ours): `graph.completion_shape`'s reader."""
    if not settings.configured or settings.model is None or settings.api_key is None:  # (the last two: for mypy)
        raise SettingsError(settings.describe_missing())
    return ShapedChatOpenAI(base_url=settings.base_url, model=settings.model, api_key=SecretStr(settings.api_key),
                            timeout=settings.timeout_s, max_retries=0, temperature=settings.temperature,
                            asked_temperature=settings.temperature, max_completion_tokens=settings.max_tokens)


class Backbone(BackboneIdentity):
    """Structured and tool-calling backbone calls with retries, usage accounting and caching; its model, settings
    and stage keys: `graph.backbone_identity.BackboneIdentity`."""

    @classmethod
    def from_settings(cls, settings: BackboneSettings, *, model: BaseChatModel | None = None,
                      cache: StageCache | None = None, setting_names: EndpointNames = BACKBONE_NAMES) -> Backbone:
        """Backbone from settings; `model` overrides the default ChatOpenAI (`default_chat_model`; the cache key uses
        `settings.model` as the model name and `settings.base_url` as the endpoint, unless `model` asks for others:
        `key_of`); `setting_names`: those its caller reads, named in its faults (`raa eval world-model`'s)."""
        chat = model if model is not None else default_chat_model(settings)
        return cls(chat, method=settings.method, schema_retries=settings.schema_retries,
                   max_retries=settings.max_retries, timeout_s=settings.timeout_s, cache=cache,
                   model_name=settings.model, temperature=settings.temperature, endpoint=settings.base_url,
                   setting_names=setting_names)


    # -- one model invocation with transport retries ---------------------------------------------
    async def invoke(self, stage: str, runnable: Runnable, messages: list[BaseMessage], usage: Usage,
                     parts: Sent | None = None) -> Any:
        """`runnable`'s output for `messages`, counted in `usage`; raises InvalidReply (re-ask) or BackboneFault.
        `parts`: what `runnable` sends besides the messages (its tools or `response_format`), read with them where
        the error has no request body to read (`graph.setup_rejections.sent_request`)."""
        sent = sent_request(messages, parts)
        tries = 1
        failed: BaseException | None = None
        try:
            try:
                out = await self._attempt(runnable, messages, usage)
            except BaseException as exc:  # (whatever tenacity's attempt catches: it decides what comes of it)
                failed = exc
            if failed is not None:  # tenacity from here on, as if it had made the first try (`_retrying`)
                async for attempt in self._retrying(sent):
                    with attempt:
                        if failed is not None:
                            replayed, failed = failed, None
                            raise replayed
                        tries += 1
                        out = await self._attempt(runnable, messages, usage)
        except UnicodeEncodeError as exc:  # a ValueError, but raised building the request: nothing was sent
            raise BackboneFault(stage, "transport", f"the request could not be sent ({type(exc).__name__}: {exc}); "
                                "a header value (the API key, RAA_API_KEY) holds a character HTTP cannot carry "
                                "(a pasted smart quote?)") from exc
        except (ValidationError, ValueError) as exc:  # a reply came back but failed validation, or none came
            self._raise_if_not_a_completion(stage, exc)
            if not reply_came_back(exc):
                raise BackboneFault(stage, "transport", f"the chat model raised {type(exc).__name__} with no reply "
                                    f"to read (no call counted, not re-asked): {str(exc)[:_ERR_CHARS]}") from exc
            count_reply(usage, messages, None, response=(response := getattr(exc, "response", None)))
            raise InvalidReply("invalid_reply", str(exc), reply_text(response)) from exc
        except ModelRefusalError as exc:
            count_reply(usage, messages, None)
            raise BackboneFault(stage, "refused", f"{MODEL_REFUSED}{exc}") from exc
        except (openai.LengthFinishReasonError, openai.ContentFilterFinishReasonError) as exc:
            # a reply came back (openai's structured-output parse refuses it before LangChain sees it)
            count_reply(usage, messages, None, getattr(exc, "completion", None))
            if isinstance(exc, openai.ContentFilterFinishReasonError):
                raise BackboneFault(stage, "refused", FILTERED) from exc
            raise InvalidReply("invalid_reply", CUT_HINT, completion_text(exc.completion), cut=True) from exc
        except Exception as exc:
            self._raise_if_not_a_completion(stage, exc)
            attempts = f"{tries} attempt{'' if tries == 1 else 's'}"  # fewer than allowed when the server said so
            if is_timeout(exc):
                raise BackboneFault(stage, "timeout", f"no reply within {self.timeout_s}s after {attempts} "
                                    f"({type(exc).__name__})") from exc
            if transient_error(exc, sent):  # the kind is the error's, whatever x-should-retry said (graph/transport.py)
                detail = quoted_words(exc, _ERR_CHARS)
                if hint := connection_hint(exc, self.setting_names):  # one sentence: "Connection error; the ..."
                    detail = clause_joined(detail, hint)
                raise BackboneFault(stage, "transport", f"{type(exc).__name__} after {attempts}: {detail}") from exc
            if (fix := settings_problem(exc, self.setting_names, sent, self.method)) is not None:
                raise BackboneFault(stage, "settings", f"{type(exc).__name__}: "
                                    f"{clause_joined(quoted_words(exc, _ERR_CHARS), fix)}") from exc
            if isinstance(exc, openai.APIStatusError | ModelError):
                raise BackboneFault(stage, "refused", f"{type(exc).__name__}: {quoted_words(exc, _ERR_CHARS)}") from exc
            raise BackboneFault(stage, "transport", f"unexpected {type(exc).__name__}: "
                                f"{str(exc)[:_ERR_CHARS]}") from exc
        raw = out["raw"] if isinstance(out, dict) else out
        count_reply(usage, messages, raw if isinstance(raw, AIMessage) else None)
        return out

    def _retrying(self, sent: Sent) -> AsyncRetrying:
        """Tenacity's retries of a call whose first try failed (`invoke`): its first attempt raises that try's error
        again, sending nothing, so it decides as if it had made the try (retry or not, the stop counting it,
        `PacedWait` reading its error and attempt number 1). The first try runs outside tenacity: its machinery
        cost ~0.1 ms of event-loop CPU per call, most of which succeed at once."""
        return AsyncRetrying(stop=stop_after_attempt(self.max_retries + 1),
                             wait=PacedWait(self.retry_wait[0], self.retry_wait[1]),
                             retry=retry_if_exception(partial(is_transient, sent=sent)), reraise=True)

    async def _attempt(self, runnable: Runnable, messages: list[BaseMessage], usage: Usage) -> Any:
        """One request of `invoke`, counted in `usage.attempts` when it was sent, whatever came of it."""
        try:
            out = await asyncio.wait_for(runnable.ainvoke(messages), self.timeout_s)
        except Exception as exc:
            usage.attempts += self._sent(exc)
            raise
        usage.attempts += 1
        return out

    def _sent(self, exc: Exception) -> bool:
        """Whether a request left before the model raised `exc`: not when the client could not build or send it (a
        header HTTP cannot carry, `graph.transport.request_not_built`, a ValueError with no reply to read that is
        no answer of the wrong kind either: `invoke`'s faults that say nothing was sent)."""
        if isinstance(exc, UnicodeEncodeError) or request_not_built(exc) is not None:
            return False
        return not isinstance(exc, ValueError) or reply_came_back(exc) or \
            not_a_completion(exc, self.setting_names) is not None

    def _raise_if_not_a_completion(self, stage: str, exc: Exception) -> None:
        """A "transport" fault at once when the endpoint answered with something other than a chat completion
        (a web page: its base URL setting, `setting_names`, is wrong; graph.transport.not_a_completion), or no
        request left at all (the client could not build it: `graph.transport.request_not_built`); not a call,
        never re-asked."""
        if (why := not_a_completion(exc, self.setting_names) or request_not_built(exc)) is not None:
            raise BackboneFault(stage, "transport", why) from exc

    # -- structured outputs ------------------------------------------------------------------------
    async def astructured(self, stage: str, schema: type[_Out], messages: list[BaseMessage], usage: Usage,
                          *, params: dict | None = None) -> _Out:
        """A validated `schema` instance for this stage; raises BackboneFault after bounded retries."""
        if (cache := self.cache) is None:
            return await self._structured(stage, schema, messages, usage)
        key = self.key_of(stage, messages, method=self.method, params=params, schema=schema)

        async def compute() -> _Out:
            cached = await lookup(cache, key, lambda text: decode_stored(schema, text), stage)
            if cached is not None:
                usage.cache_hits += 1
                return cached
            out = await self._structured(stage, schema, messages, usage)
            await store(cache, key, encode_output(out), stage)
            return out

        return await self.shared(cache, stage, key, compute, usage)

    @staticmethod
    async def shared(cache: StageCache, stage: str, key: str, compute: Callable[[], Awaitable[_Out]],
                      usage: Usage) -> _Out:
        """`compute()` once for identical concurrent calls (`StageCache.share`): a waiter takes the holder's fault."""
        try:
            out, shared = await cache.share(key, compute)
        except FlightFailed as failed:
            if isinstance(error := failed.error, BackboneFault):
                raise BackboneFault(stage, error.kind, f"{error.message} (the fault of a concurrent identical "
                                    "call; not asked again)") from error
            raise error from None
        if shared:
            usage.cache_hits += 1
        return out

    async def _structured(self, stage: str, schema: type[_Out], messages: list[BaseMessage],
                          usage: Usage) -> _Out:
        convo = list(messages)
        if self.method == "json_mode":
            convo.append(HumanMessage(content="Reply with one JSON object that validates against this JSON schema:\n"
                                              + json.dumps(schema.model_json_schema())))
        last: InvalidReply | None = None
        for _ in range(self.schema_retries + 1):
            try:
                return await self._structured_once(stage, schema, convo, usage)
            except InvalidReply as bad:
                last = bad
                convo = convo + reask(schema.__name__, bad)
        assert last is not None
        raise BackboneFault(stage, last.kind, f"{self.schema_retries + 1} replies failed {schema.__name__} "
                            f"({self.method}); last: {excerpt(last.message)}")

    def _structured_runnable(self, schema: type[BaseModel]) -> Runnable:
        """The model runnable of structured calls for `schema`, built once per (schema, method, model):
        ChatOpenAI's `with_structured_output` converts the pydantic schema on every call (~1.7 ms for
        Assessment, on the event loop), and runnables are immutable, so one serves every call. (The
        cached runnable holds the model, so its id cannot be reused while the entry exists.)"""
        key = (schema, self.method, id(self.model))
        runnable = self._runnables.get(key)
        if runnable is None:
            runnable = (self.model.bind(response_format={"type": "json_object"}) if self.method == "json_mode"
                        else self.model.with_structured_output(schema, method=self.method, include_raw=True))
            self._runnables[key] = runnable
        return runnable

    async def _structured_once(self, stage: str, schema: type[_Out], convo: list[BaseMessage],
                               usage: Usage) -> _Out:
        try:
            runnable = self._structured_runnable(schema)
        except NotImplementedError as exc:
            raise BackboneFault(stage, "settings", unsupported(self.model, f"give {self.method} structured output",
                                                               exc, STRUCTURED_REMEDY)) from exc
        try:
            parts = structured_parts(self.method, schema.__name__)
            return read_reply(schema, self.method, await self.invoke(stage, runnable, convo, usage, parts))
        except ReplyFault as fault:
            raise BackboneFault(stage, fault.kind, fault.message) from None

    # -- tool rounds (graph/tool_rounds.py) -------------------------------------------------------
    async def atool_round(self, stage: str, messages: list[BaseMessage], tools: Sequence[BaseTool | dict],
                          usage: Usage) -> AIMessage:
        """One reply of the model bound to `tools` (tool calls or a final text); raises BackboneFault."""
        return await tool_round(self, stage, messages, tools, usage)

    # -- sync wrappers (usable inside a running event loop too: see graph.bridge.run_sync) ---------
    def structured(self, stage: str, schema: type[_Out], messages: list[BaseMessage], usage: Usage,
                   *, params: dict | None = None) -> _Out:
        return run_sync(self.astructured(stage, schema, messages, usage, params=params))

    def tool_round(self, stage: str, messages: list[BaseMessage], tools: Sequence[BaseTool | dict],
                   usage: Usage) -> AIMessage:
        return run_sync(self.atool_round(stage, messages, tools, usage))
