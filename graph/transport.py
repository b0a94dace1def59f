"""Which model-call failures are worth retrying (graph.backbone's transport policy, DESIGN.md §3 "Backbone"),
which say the endpoint is not an OpenAI-compatible chat-completions server at all, and which mean no reply came
back for want of a connection or of time (`no_answer`: what `raa doctor` asks "is the server up" about).

A URL that answers `POST .../chat/completions` with a 200 that is not a chat completion (a web page, a server
root without `/v1` behind a catch-all route, another API's JSON) made the openai SDK and langchain-openai raise
whatever their parsing tripped on: an AttributeError or TypeError when the structured-output parser read it
(json_schema, json_mode), a ValueError, TypeError or KeyError from langchain-openai otherwise (function_calling,
tool rounds; the ValueError was taken for an invalid reply and re-asked). `not_a_completion` recognises it:
- the most direct evidence first: the HTTP reply the client attached to the error (the structured-output path
  attaches it): a 2xx whose body is not a JSON object with a `choices` list;
- else (langchain-openai raises after the HTTP reply is dropped) an error raised by langchain-openai's reader
  of the body itself (`_READER`, its innermost frame), or one of the messages it gives exactly this case
  (`_LC_SHAPE`): either signal suffices, so one renamed in a later version still leaves the other; both are
  pinned by tests/test_backbone_http.py against the installed version.
A completion with no choice, or a choice without a message, is named as such (`graph.completion_shape`).
Decided where the issue was silent: a 200 with an `{"error": ...}` body is reported the same way (it is no
completion; re-asking does not help), its body shown in the message.

The server's say on retrying (as the openai SDK reads it; ours are the retries, the SDK's are off):
- `x-should-retry: true` / `false` on an error reply decides whether it is retried, whatever its status (but
  `true` on a reply the same request meets again: a part of the request the server does not take, an account
  without credit, a model without a chat template, `answered_alike`); it does not say what the failure is: once the
  tries end, the fault's kind is read from the error itself (`transient_error`, `settings_problem`), so a 401 the server said to retry is still "settings" (it was
  "transport"), a 503 it said not to retry still "transport" (it was "refused", the model's answer about the
  clip, so not counted as an outage);
- without it, 408, 409 (OpenAI's lock timeout), 429 (but OpenAI's for an account without credit: `no_credit`)
  and 5xx but 501 and 505 are retried;
- the wait before the next try (`PacedWait`) is the one the reply asks for (`retry-after-ms`, else
  `Retry-After` in seconds or as an HTTP date) when it is above 0, else exponential backoff with jitter;
  either way at most the policy's max wait (`Backbone.retry_wait`). Decided where the issue was silent: a
  server asking for longer than that max is still tried again after the max (the number of tries bounds
  the policy, not the server), where the openai SDK gives up at once on a wait above its own 2 minutes.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import httpx
import openai
from langchain_core.exceptions import ModelConnectionError, ModelError, ModelTimeoutError
from tenacity import RetryCallState
from tenacity.wait import wait_base

from graph.cache_keys import shown_endpoint
from graph.completion_shape import MalformedCompletion, choice_problem

# re-exported: their home before graph/settings_faults.py and graph/server_limits.py
from graph.server_limits import limit_kind as limit_kind
from graph.server_limits import rejected_request as rejected_request
from graph.server_limits import server_limit as server_limit
from graph.settings_faults import SETTINGS_STATUSES as SETTINGS_STATUSES
from graph.settings_faults import UNSERVED_STATUSES, no_credit, no_template
from graph.settings_faults import settings_problem as settings_problem
from graph.setup_rejections import INSPECT_PLAN, Sent, unsupported_part
from graph.usage import http_response_types
from tools.http_retry import retry_after_s as header_wait_s

_STALE_LOOP = ("Event loop is closed", "bound to a different event loop", "attached to a different loop")
"""What a pooled keep-alive connection opened on another, or a finished, event loop raises when reused
(langchain-openai shares one async HTTP client process-wide: langchain-ai/langchain#35783). The client
drops that connection, so the retry opens a new one. See graph/bridge.py."""


def is_transient(exc: BaseException, sent: Sent | None = None) -> bool:
    """True for a failed model call worth trying again: an error reply's `x-should-retry: true|false` header when
    it has one (module docstring), else `transient_error` (`sent`: as there). Never a reply the same request meets
    again (`answered_alike`: a part the server or model does not take, no credit, no chat template), whatever the
    header (llama.cpp's 500s; with `true` it was sent `max_retries` more times, then "settings")."""
    if isinstance(exc, openai.APIStatusError):
        told = exc.response.headers.get("x-should-retry")
        if told in ("true", "false"):
            return told == "true" and not answered_alike(exc, sent)
    return transient_error(exc, sent)


def answered_alike(exc: BaseException, sent: Sent | None = None) -> bool:
    """True for an error reply that the same request meets again, whatever its status and `x-should-retry`: a part of
    the request the server or model does not take (`unsupported_part`, `sent` as there), an account without credit
    (`no_credit`), a model served without a chat template (`graph.settings_faults.no_template`). Some servers send
    each as a 500 (graph/settings_faults.py): retried, each was then "transport", naming nothing to change."""
    return unsupported_part(exc, sent) is not None or no_credit(exc) or no_template(exc)


def transient_error(exc: BaseException, sent: Sent | None = None) -> bool:
    """True for a transport error, by the error alone (timeouts, connection errors, Python's own `ConnectionError`
    too: refused or reset, from a chat model that does not wrap it; 408, 409, 429 but an account without credit's
    (`no_credit`), 5xx but 501 and 505, which say the server cannot serve such a request at all, and a 5xx the same
    request meets again (`answered_alike`: read against `sent` where the error has no request body to read), as
    another chat model's retryable `ModelError`; a stale pooled connection): what the fault of a call that
    failed with it is (kind "transport"), whatever the server's `x-should-retry` said about trying again."""
    if isinstance(exc, openai.APIStatusError):
        code = exc.status_code
        return (code >= 500 and code not in UNSERVED_STATUSES and not answered_alike(exc, sent)) or \
            code in (408, 409) or (code == 429 and not no_credit(exc))
    if isinstance(exc, openai.APIConnectionError | openai.APITimeoutError | TimeoutError | ConnectionError):
        return True
    if isinstance(exc, _http_errors()[0] + _http_errors()[1]):
        return True
    if isinstance(exc, RuntimeError) and any(m in str(exc) for m in _STALE_LOOP):
        return True
    return isinstance(exc, ModelError) and type(exc).is_retryable and not answered_alike(exc, sent)


def is_timeout(exc: BaseException) -> bool:
    """True for a timeout (reported as kind "timeout" once the retries are spent): the openai SDK's, an
    httpx / httpx2 one, the time guard's TimeoutError, or LangChain's `ModelTimeoutError`, the class any
    integration marks a timeout with (langchain-openai's is also an openai.APITimeoutError; another
    provider's was retried, as `is_retryable` says, but then reported as "transport")."""
    return (isinstance(exc, openai.APITimeoutError | TimeoutError | ModelTimeoutError)
            or isinstance(exc, _http_errors()[0]))


def no_answer(exc: BaseException) -> bool:
    """True when `exc` says no reply came back for want of a connection or of time: a timeout (`is_timeout`), or a
    connection refused, reset or never made (the openai SDK's, an httpx / httpx2 transport error, Python's
    `ConnectionError`, LangChain's `ModelConnectionError`). An error status is an answer; a request that could
    not be built or sent (`request_not_built`, a header the client cannot encode) never reached the server."""
    return (is_timeout(exc) or isinstance(exc, openai.APIConnectionError | ConnectionError | ModelConnectionError)
            or isinstance(exc, _http_errors()[1]))


@lru_cache(maxsize=1)
def _http_errors() -> tuple[tuple[type[Exception], ...], tuple[type[Exception], ...]]:
    """(timeouts, transport errors) of the HTTP packages a model client may raise from: httpx's, and
    httpx2's (openai >= 3 sends with httpx2, whose classes are not httpx's: an httpx2.ReadTimeout that
    escapes the SDK unwrapped, as from a streamed body, was neither transient nor a timeout)."""
    try:
        import httpx2
    except ImportError:
        return (httpx.TimeoutException,), (httpx.TransportError,)
    return (httpx.TimeoutException, httpx2.TimeoutException), (httpx.TransportError, httpx2.TransportError)


def retry_after_s(exc: BaseException | None) -> float | None:
    """The seconds an error reply asks the client to wait before trying again (`retry-after-ms`, else
    `Retry-After` as seconds or an HTTP date), or None when it does not say (or says nothing finite)."""
    if not isinstance(exc, openai.APIStatusError):
        return None
    headers = exc.response.headers
    try:
        asked_ms = float(headers.get("retry-after-ms", ""))
    except ValueError:  # Retry-After as the service clients read it (seconds or an HTTP date; None unless > 0)
        return header_wait_s(headers.get("retry-after"))
    return asked_ms / 1000.0 if math.isfinite(asked_ms) else None


class PacedWait(wait_base):
    """Tenacity wait: what the failed try's reply asked for (`retry_after_s`, when above 0), else exponential
    backoff with jitter from `initial_s`; never more than `max_s` (module docstring)."""

    def __init__(self, initial_s: float, max_s: float) -> None:
        self.initial_s = initial_s
        self.max_s = max_s

    def __call__(self, retry_state: RetryCallState) -> float:
        outcome = retry_state.outcome
        asked = retry_after_s(outcome.exception()) if outcome is not None and outcome.failed else None
        if asked is not None and asked > 0:
            return min(asked, self.max_s)
        return backoff_s(retry_state.attempt_number, self.initial_s, self.max_s)


def backoff_s(attempt: int, initial_s: float, max_s: float) -> float:
    """The wait after failed try `attempt` (1, 2, ...): `initial_s * 2**(attempt - 1)` plus a jitter up to
    `initial_s`, at most `max_s` (tenacity's wait_exponential_jitter, whose `initial` name tenacity 9 deprecates
    and whose new name 8.x lacks)."""
    try:
        wait = initial_s * 2.0 ** (attempt - 1) + random.uniform(0.0, initial_s)
    except OverflowError:
        return max_s
    return max(0.0, min(wait, max_s))


_LC_SHAPE = ("Unexpected response type from OpenAI-compatible endpoint", "Response missing 'choices' key",
             "Received response with null value for 'choices'")
"""How langchain-openai (1.x) says a 200 body was not a chat completion (raised by `_READER`)."""
_READER = "_create_chat_result"
"""The ChatOpenAI method that reads a completion's body (function_calling, tool rounds: no HTTP reply attached)."""
_PREVIEW = 120


@dataclass(frozen=True)
class EndpointNames:
    """The settings a model client's endpoint is read from, named in the fix hints of its failed calls
    (`not_a_completion`, `settings_problem`): the caller passes its own (the judge's are RAA_JUDGE_*), so no hint
    names a setting that client never reads."""

    base_url: str
    """The base URL's setting."""
    model: str
    """The model name's setting."""
    checked_by: str = ""
    """The command that checks this endpoint, pointed at in the 404 hint ("" for none)."""
    api_key: str = "the API key setting"
    """The API key's setting, named after a 401 or 403."""
    images: str = "fewer images per request"
    """What sends fewer images in one request, named when the server takes fewer (`server_limit`)."""
    request_size: str = "smaller or fewer images"
    """What makes a request shorter in tokens, named when it is longer than the model's context (`server_limit`)."""
    body_size: str = "fewer or smaller images"
    """What makes a request's body fewer bytes (its base64 images), named after a 413 (`server_limit`)."""
    method: str = "the structured-output method setting"
    """The structured method's setting, named when the server does not serve the method's request
    (`graph.setup_rejections.unsupported_fix`)."""
    no_tools: str = ""
    """What avoids tool rounds, named when the server does not serve tool calls ("": the client asks for none)."""
    temperature: str = ""
    """The sampling temperature's setting, named when the model takes only its default ("": the client has none)."""
    max_tokens: str = ""
    """The completion token cap's setting, named when the server takes a lower one (`server_limit`; "": none sent)."""

    def url_fix(self) -> str:
        """What to check when the URL answers with something other than the API."""
        return f"check {self.base_url} (an OpenAI-compatible server's URL usually ends in /v1)"


BACKBONE_NAMES = EndpointNames("RAA_BASE_URL", "RAA_MODEL", "raa doctor", "RAA_API_KEY",
                               "AgentConfig.max_images_per_call, with observe_frames and frame_budget",
                               "smaller images (RAA_IMAGE_LONG_SIDE), fewer (AgentConfig.observe_frames, "
                               "frame_budget) or a lower RAA_MAX_TOKENS",
                               "fewer images per request (AgentConfig.max_images_per_call) or smaller ones "
                               "(RAA_IMAGE_LONG_SIDE, RAA_JPEG_QUALITY)", method="RAA_STRUCTURED_METHOD",
                               no_tools=INSPECT_PLAN, temperature="RAA_TEMPERATURE",
                               max_tokens="RAA_MAX_TOKENS")
"""The agent backbone's settings (`graph.settings.BackboneSettings`)."""


def not_a_completion(exc: BaseException, names: EndpointNames) -> str | None:
    """The reason when `exc` comes from an endpoint that answered with something other than an OpenAI chat
    completion (see the module docstring), else None; it names the settings `names` to check. Never retried,
    never re-asked: the same URL answers the same way."""
    if isinstance(exc, openai.APIStatusError):  # an error status: the server speaks the API
        return None
    if isinstance(exc, MalformedCompletion):  # a completion without a choice or a message
        return str(exc)
    response = getattr(exc, "response", None)
    if isinstance(response, http_response_types()) and response.is_success:
        return _body_problem(response, names)
    if not isinstance(exc, ValueError | TypeError | KeyError):
        return None
    detail = str(exc).strip("\"'")  # a KeyError's str is its quoted repr
    if not (_raised_by_reader(exc) or detail.startswith(_LC_SHAPE)):
        return None
    cut = detail if len(detail) <= _PREVIEW else detail[:_PREVIEW] + "..."
    return (f"the endpoint's reply is not an OpenAI chat completion (HTTP 200; langchain-openai: {cut}); "
            f"{names.url_fix()}")


def connection_hint(exc: BaseException, names: EndpointNames) -> str:
    """What to check when a model call found no server (connection refused or dropped, a host not found: "" for
    anything else): the URL the request went to, without credentials, and the base URL setting `names` reads."""
    if not isinstance(exc, openai.APIConnectionError) or isinstance(exc, openai.APITimeoutError):
        return ""
    return (f"the connection to {shown_endpoint(str(exc.request.url))} failed: check {names.base_url} and that "
            "the server is running")


_BUILDERS = (("langchain_core.language_models.chat_models", "_format_for_tracing"),
             ("langchain_openai", "_get_request_payload"))
"""Where LangChain turns the messages into what it traces and sends, before anything is sent: any chat model's
`agenerate` formats them for the callbacks first, then ChatOpenAI builds the request body."""


def request_not_built(exc: BaseException) -> str | None:
    """Why no request was sent when LangChain raised `exc` while preparing it (a `_BUILDERS` frame on its
    stack: a content block it cannot translate, such as a base64 image without its mime type), else None.
    It is no reply: not a call, never re-asked (the same messages are refused the same way)."""
    tb = exc.__traceback__
    while tb is not None:
        module, name = str(tb.tb_frame.f_globals.get("__name__", "")), tb.tb_frame.f_code.co_name
        if any(name == fn and module.startswith(prefix) for prefix, fn in _BUILDERS):
            return f"the request could not be built, nothing was sent ({type(exc).__name__}: {str(exc)[:_PREVIEW]})"
        tb = tb.tb_next
    return None


def reply_came_back(exc: BaseException) -> bool:
    """Whether the chat model had a reply when it raised the ValueError `exc` (the backbone then takes it for a
    reply that failed validation: a call, re-asked): the HTTP reply langchain-openai attaches to an error raised
    once it had one (the openai SDK validating a json_schema reply inside the call), or a `_READER` frame on its
    stack (a completion being read, its HTTP reply not attached). Any other ValueError came with no reply to
    read (a chat model's own check of its request or parameters): no call, and not re-asked (the same request is
    refused the same way)."""
    if isinstance(getattr(exc, "response", None), http_response_types()):
        return True
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name == _READER:
            return True
        tb = tb.tb_next
    return False


def _raised_by_reader(exc: BaseException) -> bool:
    """True when langchain-openai's completion reader raised `exc` itself (its innermost frame): every raise
    there is about the body's shape (not a dict, an `error` key, no or null `choices`)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return False
    frame = tb.tb_frame
    return frame.f_code.co_name == _READER and str(frame.f_globals.get("__name__", "")).startswith("langchain_openai")


def _body_problem(response: Any, names: EndpointNames) -> str | None:
    """None when the 2xx `response` (httpx's or httpx2's) is a JSON object with a `choices` list (a chat
    completion's shape) whose every choice holds a message (`graph.completion_shape.choice_problem`), else why."""
    try:
        body = json.loads(response.content)
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("choices"), list):
        return choice_problem(body)  # None for a completion with a message in every choice
    kind = response.headers.get("content-type", "no content-type")
    preview = response.content[:_PREVIEW].decode("utf-8", "replace")
    return (f"the endpoint's reply is not an OpenAI chat completion (HTTP {response.status_code} from "
            f"{response.request.url}, content-type {kind}, body {preview!r}); {names.url_fix()}")
