"""The limits of a server's setup a rejected request exceeds (graph.setup_rejections.server_limit's concern, moved out of
graph/setup_rejections.py, which re-exports these names; DESIGN.md §3 "Faults"): a body, image count, context or
completion token cap above what the server or the model takes, each named with what to change. Every clip of a run
sends requests of about the same size, so such a rejection is the setup's, not the clip's: kind "settings".
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

import openai
from langchain_core.exceptions import ContextOverflowError, ModelAPIError

from graph.deepseek_words import WHOLE_CLOSE, WHOLE_OPEN
from graph.server_words import server_answered, server_words

if TYPE_CHECKING:  # pragma: no cover
    from graph.transport import EndpointNames

_IMAGE_LIMIT = re.compile(r"limit[-_]mm[-_]per[-_]prompt|at most \d+ \w+\(s\) may be provided|too many images|"
                          + WHOLE_OPEN + r"model '[^'\n]{1,120}' supports at most \d+ images? per prompt" + WHOLE_CLOSE)
"""How vLLM says a request holds more images (or videos) than `--limit-mm-per-prompt` lets one prompt have:
"At most N image(s) may be provided in one prompt/request." (older), or naming the flag (newer); how hosted APIs
say theirs ("Too many images in request: 54 > 30", "... Max is 50."); how a provider behind OpenRouter says its
model's ("Model 'moonshotai/kimi-k2.6' supports at most 1 image per prompt.", relayed in `error.metadata.raw`:
diegosouzapw/OmniRoute#3044), read as the whole of a message (graph.deepseek_words `WHOLE_OPEN`, `WHOLE_CLOSE`) so a
500 echoing the model's output that quotes them is no limit. It was "refused" for every clip. The number is the limit
in each, a limit of 0 a model that takes no image (`NO_IMAGES`)."""
NO_IMAGES = re.compile(r"at most 0 image|[\"']image[\"']: 0\b")
"""vLLM's limit of no image at all (a text-only model, or a limit of 0): a model that takes none, not a limit."""
_BODY_LIMIT = ("request entity too large", "payload too large", "content too large")
"""How HTTP servers and proxies name a 413 (RFC 9110 calls it "Content Too Large"; nginx's page says "Request Entity
Too Large"): the words another chat model's `ModelError` carries when no status is attached."""
_CONTEXT_LIMIT = ("maximum context length", "maximum model length", "context_length_exceeded", "context window",
                  "prompt is too long", "exceed_context_size_error", "exceeds the available context size",
                  "exceeds context size", "longer than the model's context length",
                  "`inputs` tokens + `max_new_tokens` must be <=", "`inputs` must have less than")
"""How OpenAI-compatible servers say a request is longer than the model's context (vLLM: "This model's maximum
context length is ...", "The decoder prompt (length N) is longer than the maximum model length of M"; llama.cpp's
server: its error type `exceed_context_size_error`, with "request (N tokens) exceeds the available context size (M
tokens), try increasing it" or, in other builds, "... exceeds context size ..." (quoted from its
tools/server/server-context.cpp by third parties: not read in llama.cpp's own source here); SGLang: "The input (N
tokens) is longer than the model's context length (M tokens)." (sgl-project/sglang
test/srt/test_request_length_validation.py); TGI: "`inputs` tokens + `max_new_tokens` must be <= N. Given: ...",
"`inputs` must have less than N tokens. Given: ..." (huggingface/text-generation-inference router/src/validation.rs)).
Those three were "refused", every clip's answer, and the doctor asked whether the model takes images."""

_MAX_NEW_TOKENS = re.compile(r"(?<!\+ )`max_new_tokens` must be <=|max_(?:completion_)?tokens is too large|"
                             r"invalid max_tokens value|range of max_tokens should be|parameter `?max_(?:completion_)?"
                             r"tokens`? specified in the request (?:are|is) not valid: integer above maximum value")
"""How servers say the completion token cap asked for (the client's max tokens setting) is above the model's or the
server's: TGI's "`max_new_tokens` must be <= N. Given: M" (ValidationError::MaxNewTokens, above --max-total-tokens
less --max-input-tokens; huggingface/text-generation-inference router/src/validation.rs, as in its fork
predibase/lorax), not its "`inputs` tokens + `max_new_tokens` ..." (`_CONTEXT_LIMIT`); OpenAI's "max_tokens is too
large: N. This model supports at most M completion tokens, whereas you provided N." (as its API's users quote it);
DeepSeek's "Invalid max_tokens value, the valid range of max_tokens is [1, N]" (deepseek-ai/DeepSeek-V3#69),
DashScope's "InternalError.Algo.InvalidParameter: Range of max_tokens should be [1, N]" (open-webui/open-webui#10507),
Volcengine Ark's (Doubao's) "The parameter `max_completion_tokens` specified in the request are not valid: integer
above maximum value, expected a value <= N, but got M instead." (or `max_tokens`, with or without the backticks; as
their users quote them: Gitlawb/openclaude#331, langgenius/dify#14376), not its other invalid values of that
parameter ("max_tokens and max_completion_tokens cannot be set at the same time"). Was "refused", every clip's
answer."""


def rejected_request(exc: BaseException) -> bool:
    """Whether the server rejected the request itself: a 4xx status, or a LangChain `ModelError` another chat model
    raised that is the server's answer (`server_answered`: not a reply the model declined, nor one that never came,
    which it counted, langchain-openai's `OpenAIConnectionError` and `OpenAITimeoutError` too) but a 5xx. A
    `ModelError` says its status by its class: `ModelAPIError` is a 5xx, no rejection, as an openai 5xx is not (it was
    read as one: a 500 echoing the model's own output that quotes an image limit's words was that limit); a base
    `ModelError` carries none and is read as a rejection."""
    if isinstance(exc, openai.APIStatusError):
        return 400 <= exc.status_code < 500
    return server_answered(exc) and not isinstance(exc, ModelAPIError)


def limit_kind(exc: BaseException) -> Literal["body", "images", "context", "max_tokens"] | None:
    """Which limit of the server's setup a rejected request exceeded (`rejected_request`: a 4xx status, or a LangChain
    `ModelError` another chat model raised but a 5xx `ModelAPIError`): "body", a body of more bytes than the server
    or a reverse proxy before it takes (HTTP 413, nginx's `client_max_body_size`, or the words for it); "images",
    more than it takes in one request;
    "context", more tokens than the model's context (LangChain's `ContextOverflowError`, or the server's words
    for it); "max_tokens", a completion token cap above the one it takes (`_MAX_NEW_TOKENS`); None for any other
    error. An error with no status of its own read from an openai error on its `__cause__` is read by that status:
    langchain-openai's `OpenAIAPIContextOverflowError` is raised for any API error saying "exceeds the context
    window", a 500 echoing the model's own output too, and was that limit."""
    cause = None if isinstance(exc, openai.APIStatusError) else exc.__cause__
    if not rejected_request(exc) or (isinstance(cause, openai.APIStatusError) and not rejected_request(cause)):
        return None
    text = server_words(exc).lower()
    if (isinstance(exc, openai.APIStatusError) and exc.status_code == 413) or any(m in text for m in _BODY_LIMIT):
        return "body"
    if _IMAGE_LIMIT.search(text) and not NO_IMAGES.search(text):  # none at all: `unsupported_part`
        return "images"
    if isinstance(exc, ContextOverflowError) or any(m in text for m in _CONTEXT_LIMIT):
        return "context"
    return "max_tokens" if _MAX_NEW_TOKENS.search(text) else None


def server_limit(exc: BaseException, names: EndpointNames) -> str | None:
    """What to change when the server rejected a request for exceeding a limit of its setup (`limit_kind`), naming
    the settings `names`; None for any other error. Every clip of a run sends requests of about the same size, so
    it is the setup's limit, not the clip's: a setting to change on the server or in the client."""
    kind = limit_kind(exc)
    if kind == "body":
        return ("HTTP 413: the request body is larger than the server, or a reverse proxy before it, takes: raise "
                f"its limit (nginx: client_max_body_size) or send less: {names.body_size}")
    if kind == "images":
        return ("the server takes fewer images per request than were sent: raise its limit (vLLM: "
                f"--limit-mm-per-prompt '{{\"image\": 64}}') or send fewer ({names.images})")
    if kind == "context":
        return ("the request is longer than the model's context: raise it on the server (vLLM: --max-model-len; "
                "SGLang: --context-length; llama.cpp: --ctx-size; TGI: --max-input-tokens, --max-total-tokens) or "
                f"send a shorter one: {names.request_size}")
    if kind == "max_tokens":
        return ("the completion token cap sent is above the one the server takes for the model: "
                + (f"lower {names.max_tokens} or " if names.max_tokens else "") +
                "raise the server's, where it is yours (TGI: --max-total-tokens, less --max-input-tokens; a hosted "
                "API's is the model's)")
    return None
