"""Stage-cache keys: the sha256 of a canonical rendering of one stage input (what `graph.cache` keys on; its
module docstring says what a key covers and why). Image data URLs are keyed by their own sha256, memoised,
so a frame sent again costs one dict lookup.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache
from typing import Any
from urllib.parse import unquote_plus, urlsplit

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from pydantic import BaseModel


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_URL_SHA: OrderedDict[str, str] = OrderedDict()
_URL_SHA_MAX = 4096
_URL_SHA_MAX_CHARS = 64 * 2**20
"""The memo keeps its URLs alive, so it is bounded by their size too: 4096 data URLs of 1024-px frames
would hold ~400 MB after the frame cache itself had dropped them."""
_url_chars = 0
_URL_LOCK = threading.Lock()


def _url_sha(url: str) -> str:
    """sha256 of an image data URL, memoised (LRU bounded by count and characters): the frame cache hands out the same string
    objects again and again, and a str caches its own hash, so a repeat costs one dict lookup.
    `graph.frame_store.FrameStore` calls `url_digest` right after encoding (in its worker thread), so
    stage keys built on the event loop find the digest already memoised."""
    with _URL_LOCK:
        hit = _URL_SHA.get(url)
        if hit is not None:
            _URL_SHA.move_to_end(url)
            return hit
    global _url_chars
    digest = _sha(url)
    with _URL_LOCK:
        if url not in _URL_SHA:
            _url_chars += len(url)
        _URL_SHA[url] = digest
        while len(_URL_SHA) > 1 and (len(_URL_SHA) > _URL_SHA_MAX or _url_chars > _URL_SHA_MAX_CHARS):
            old, _ = _URL_SHA.popitem(last=False)
            _url_chars -= len(old)
    return digest


def url_digest(url: str) -> str:
    """Public name of the memoised data-URL digest used in stage keys (see `_url_sha`)."""
    return _url_sha(url)


@lru_cache(maxsize=512)
def _schema_entry(schema: type[BaseModel]) -> dict[str, Any]:
    return {"name": schema.__name__, "json": schema.model_json_schema()}


def _render_block(block: Any) -> Any:
    """A content block with image data replaced by its hash (text blocks unchanged). Only dicts and lists are
    walked: any other value comes back as it is, so it is taken as it is without a call per string (a stage's
    messages hold ~500 values, most of them strings: labels, texts, types)."""
    if isinstance(block, dict):
        out: dict[str, Any] = {}
        for k, v in block.items():
            if k == "image_url":
                url = v.get("url", "") if isinstance(v, dict) else str(v)
                detail = v.get("detail") if isinstance(v, dict) else None
                out[k] = {"sha256": _url_sha(url), "detail": detail}
            elif isinstance(v, str):
                out[k] = {"sha256": _url_sha(v)} if k in ("data", "base64") or (k == "url" and v.startswith("data:")) \
                    else v
            elif isinstance(v, dict | list):
                out[k] = _render_block(v)
            else:
                out[k] = v
        return out
    if isinstance(block, list):
        return [_render_block(b) if isinstance(b, dict | list) else b for b in block]
    return block


def render_messages(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """Messages as plain JSON-able dicts: type, content (images hashed), tool calls and ids."""
    rendered = []
    for m in messages:
        item: dict[str, Any] = {"type": m.type, "content": _render_block(m.content)}
        if isinstance(m, AIMessage) and m.tool_calls:
            item["tool_calls"] = [{"name": c["name"], "args": c["args"], "id": c.get("id")} for c in m.tool_calls]
        if isinstance(m, ToolMessage):
            item["tool_call_id"] = m.tool_call_id
        rendered.append(item)
    return rendered


_DEFAULT_PORTS = {"http": 80, "https": 443}


@lru_cache(maxsize=64)
def endpoint_identity(url: str) -> str:
    """The endpoint as the stage key holds it: scheme and host in lower case, no default port, no credentials,
    no trailing slash or fragment (one server written two ways shares its entries). Anything that is not an
    http(s) URL with a host (no server answers there: the calls fail and say so) is keyed as written."""
    text = url.strip()
    parts = urlsplit(text)
    try:
        port = parts.port
    except ValueError:  # a port that is not a number
        return text
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return text
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname  # an IPv6 address keeps its brackets
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}" + (f"?{parts.query}" if parts.query else "")


_CREDENTIAL_PARTS = ("key", "token", "secret", "password", "sig", "auth", "credential")
"""A query parameter whose name holds one of these (any case) carries a credential (`shown_endpoint`)."""


def shown_endpoint(url: str) -> str:
    """`endpoint_identity` as the project shows it (a fault's connection hint, a batch row's ``scorer.endpoint``):
    the value of a query parameter named like a credential (``api_key``, ``token``, ``sig``...) becomes
    ``sha256:`` and 12 hex digits of it, so one key still reads as one endpoint and two keys as two, and the key
    itself is never written. Other parameters (Azure's ``api-version``) stay as written: which server answers."""
    identity = endpoint_identity(url)
    base, sep, query = identity.partition("?")
    if not sep:
        return identity
    return f"{base}?" + "&".join(_shown_pair(pair) for pair in query.split("&"))


def _shown_pair(pair: str) -> str:
    """One ``name=value`` of a query as `shown_endpoint` shows it: a credential's value as its digest (one already
    shown stays), anything else as written (re-encoded, ``my%20model`` read ``my+model``: an endpoint other than
    the one rows written before recorded, so a resume into their output was refused as another scorer's)."""
    name, eq, value = pair.partition("=")
    if not eq or value.startswith("sha256:") or not any(p in unquote_plus(name).lower() for p in _CREDENTIAL_PARTS):
        return pair
    return f"{name}=sha256:{hashlib.sha256(unquote_plus(value).encode()).hexdigest()[:12]}"


def stage_key(*, model_name: str, method: str, stage: str, messages: Sequence[BaseMessage],
              params: dict[str, Any] | None = None, schema: type[BaseModel] | None = None,
              tools: Sequence[dict[str, Any]] | None = None, endpoint: str | None = None) -> str:
    """sha256 key of one stage input (see the module docstring for what it covers); `endpoint` (a base URL)
    is keyed as `endpoint_identity` gives it, and left out when None."""
    payload = {
        **({} if endpoint is None else {"endpoint": endpoint_identity(endpoint)}),
        "model": model_name,
        "method": method,
        "stage": stage,
        "messages": render_messages(messages),
        "params": params or {},
        "schema": None if schema is None else _schema_entry(schema),
        "tools": list(tools or []),
    }
    return _sha(json.dumps(payload, sort_keys=True, default=str, separators=(",", ":")))
