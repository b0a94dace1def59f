"""The words of a failed model call that its fault quotes and the matchers read (graph.setup_rejections,
graph.settings_faults; DESIGN.md §3 "Faults"): `server_words` reads what the server said in its reply, masks a
credential in it, and reads a web page as its title; `quoted_words` is what a fault's one-line reason quotes of them,
and `clause_joined` adds a clause to such a quote. `server_answered` says whether an error is the server's answer at
all (not a failed connection, nor the model's own refusal).
Moved out of graph/setup_rejections.py, which re-exports `server_words`.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping

import openai
from langchain_core.exceptions import ModelConnectionError, ModelError, ModelRefusalError, ModelTimeoutError

_NOT_ANSWERED = (ModelConnectionError, ModelTimeoutError, ModelRefusalError)
"""LangChain's `ModelError`s that are no server's answer to the request: no reply came (a connection refused, reset
or timed out: langchain-openai raises its connection and timeout errors as these too), or the model declined (its
own words, which may quote anything)."""


def server_answered(exc: BaseException) -> bool:
    """Whether `exc` is the server's error answer to the request: an error status (400 and up), or a LangChain
    `ModelError` another chat model raised but `_NOT_ANSWERED` (whose words are the client's or the model's: read as
    the server's, a connection error quoting "does not support tools" was a "settings" fault, never retried)."""
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code >= 400
    return isinstance(exc, ModelError) and not isinstance(exc, _NOT_ANSWERED)


def server_words(exc: BaseException) -> str:
    """The error's text with what the server said: `str(exc)`, and for an openai SDK error whose reply carries its
    words as a string, not as an `error.message` (TGI's `{"error": "<words>", "error_type": ...}`, LM Studio's
    `{"error": "<words>"}`, FastAPI's `{"detail": "<words>"}`, a body that is not JSON), those words: the SDK's text
    holds only an `error.message` (openai >= 3), so those servers' words were never read ("Error code: 422", every
    rejection "refused" whatever it said). Nothing else of the reply: a validation error's echo of the request (the
    clip's instruction, the model's own earlier text) is no word of the server's. A gateway's relay of the provider's
    reply (OpenRouter's "Provider returned error" with `metadata.raw`: `_relayed`) is read as the provider's words."""
    text = str(exc)
    if not isinstance(exc, openai.APIStatusError):
        return text
    body = exc.body
    said = _page_title(body) if isinstance(body, str) else _said(body) if isinstance(body, Mapping) else None
    if not isinstance(said, str) or not said or said in text:
        return text
    return f"{text} - {_CREDENTIAL.sub(lambda m: (m.group(1) or '') + '[redacted]', said)}"


def _said(body: Mapping[str, object]) -> object:
    """What a JSON reply says besides its `error.message` (`server_words`): FastAPI's `detail`, or else a relayed
    provider's words (`_relayed`)."""
    detail = body.get("detail")
    return detail if detail is not None else _relayed(body)


def _relayed(body: Mapping[str, object]) -> str | None:
    """The provider's words in OpenRouter's reply for a provider's error: `{"error": {"message": "Provider returned
    error", "metadata": {"raw": RAW, "provider_name": ...}}}` (diegosouzapw/OmniRoute#3044, reVrost/go-openrouter#21),
    RAW the provider's reply as a JSON string (its `error.message`, `error`, `message` or `detail` string) or as plain
    text (open-webui/computer#293; a web page as its title). `body` is the SDK's `exc.body`, the reply's "error"
    object, or the whole reply. None without one, or for a JSON reply with no such string (a validation error's
    echo of the request is no word of the provider's). The generic message alone was every such refusal's words."""
    error = body.get("error", body)
    metadata = error.get("metadata") if isinstance(error, Mapping) else None
    raw = metadata.get("raw") if isinstance(metadata, Mapping) else None
    if not isinstance(raw, str):
        return None
    try:
        reply = json.loads(raw)
    except ValueError:
        return _page_title(raw)
    if isinstance(reply, str):
        return reply
    if not isinstance(reply, Mapping):
        return None
    inner = reply.get("error")
    for said in (inner.get("message") if isinstance(inner, Mapping) else inner, reply.get("message"),
                 reply.get("detail")):
        if isinstance(said, str) and said:
            return said
    return None


_CREDENTIAL = re.compile(r"((?:bearer|basic)\s+|(?:api[_-]?key|token|authorization)[\"']?\s*[:=]\s*[\"']?)"
                         r"[\w.~+/=-]{8,}|\b(?:sk|hf|pk|rk)[-_][\w-]{16,}", re.IGNORECASE)
"""A credential in a server's words (a gateway quoting the key or header it was sent: "Invalid API key: Bearer
sk-..."): `server_words` writes them into every fault's message, row and trace, so the value is masked (the SDK
strips the request's own headers from its errors, so the key sent cannot be matched as it is)."""


_TITLE = re.compile(r"<title[^>]*>(.*?)</title", re.IGNORECASE | re.DOTALL)


def _page_title(body: str) -> str:
    """A body that is not JSON as `server_words` reads it: a web page (a reverse proxy's 502, Cloudflare's error
    page: kilobytes of markup) as its title alone ("" without one), any other text as it is. Whole, a proxy's page
    filled every clip's fault message, row and trace up to its cap with markup, where the SDK's text said only
    "Error code: 502"."""
    if not body.lstrip().startswith("<"):
        return body
    title = _TITLE.search(body)
    return " ".join(html.unescape(title.group(1)).split()) if title else ""


def quoted_words(exc: BaseException, limit: int) -> str:
    """`server_words(exc)` as a fault's one-line reason quotes them: every run of whitespace (a plain-text body's or a
    traceback's line breaks) one space, and at most `limit` characters, cut with "..." (module docstring)."""
    words = " ".join(server_words(exc).split())
    return words if len(words) <= limit else words[:limit - 3] + "..."


def clause_joined(words: str, clause: str) -> str:
    """`words` (a quote, `quoted_words`) and `clause` as clean sentences: "WORDS; CLAUSE", the words' own closing full
    stop, colon, semicolon or comma dropped ("Connection error.; the ..." read as two), not the "..." of words cut
    short, which went with it and left the cut words reading as whole (kept before a final stop too, where "cut...,"
    read "cut; ..."); after words that close with "!" or "?", which dropped would change what the server said ("Budget has
    been exceeded!", "Did you mean to use v1/completions?"), a new sentence, "WORDS! CLAUSE" (its first word
    capitalised where it is all lower case): they read "!;" and "?;". The full-width stops of a Chinese or Japanese
    provider's words ("。", "！", "？", "：", "；", "，") alike: they read "！; CLAUSE". No words (an error raised without
    a message, or only stops: "!", "..."): the clause alone, not "; CLAUSE" nor "! CLAUSE". A full stop after a "!",
    "?" or an ellipsis ("Really?.", "cut...。") is dropped first, leaving the mark before it to end the words: they
    read "?; CLAUSE" and "cut; CLAUSE", the ellipsis lost with the stop."""
    if _ONLY_STOPS.fullmatch(words):
        return clause
    words = _TRAILING_STOPS.sub("", words)  # a stop after an ellipsis or a "!": "cut...," "exceeded!, "
    if words.endswith(_FULL_STOP) or (words.endswith(".") and not words.endswith("...")):
        words = _TRAILING_STOPS.sub("", words[:-1].rstrip())  # "Really?." "cut...。": the mark before it ends them
    if words.endswith(_SENTENCE_ENDS):
        first = clause.split(" ", 1)[0]
        return f"{words} {clause[:1].upper() + clause[1:] if first.islower() else clause}"
    if not words.endswith("..."):
        words = words.rstrip("." + _FULL_STOP + _CLAUSE_STOPS).rstrip()
    return f"{words}; {clause}" if words else clause


_SENTENCE_ENDS = ("!", "?", "\uff01", "\uff1f")
"""The marks that end words as a sentence `clause_joined` keeps ("!", "?" and their full-width forms)."""
_FULL_STOP = "\u3002"
"""The ideographic full stop "。", dropped as "." is (`clause_joined`)."""
_CLAUSE_STOPS = ":;,\uff1a\uff1b\uff0c"
"""The colon, semicolon and comma, with their full-width forms, that `clause_joined` drops before its clause."""
_TRAILING_STOPS = re.compile(rf"[\s{_CLAUSE_STOPS}]+$")
"""Those stops and the spaces around them at the end of words, in any order (`clause_joined`): stripped stops first,
then spaces, "cut..., " kept its comma, and then lost its ellipsis with it ("cut; ...")."""
_ONLY_STOPS = re.compile(rf"[\s.!?\u2026\uff01\uff1f{_FULL_STOP}{_CLAUSE_STOPS}]*")
"""Words that are only stops and spaces ("!", "...", "?."): no words to quote (`clause_joined`)."""
