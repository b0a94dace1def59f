"""`indented_json`: the text of ``json.dumps(data, ensure_ascii=False, indent=1)``, built faster.

Why: the stage prompts embed the contract, the assessment and other records as indented JSON
(`graph.nodes.common.dump`), about a dozen times per agent run (every inspect round re-renders the
contract and the assessment). With ``indent`` set, the standard library skips its C encoder and runs
its generator-based pure-Python one, the largest single piece of our own Python on the event loop (a
few ms per run under the 16-run benchmark, where that Python serialises on the GIL). This builds the
same text with one recursive function and the C string encoder; prompts, stage-cache keys and replies
are unchanged byte for byte.

Exactness: the layout and the scalar spellings follow ``json.encoder._make_iterencode`` with
``indent=1``, ``separators=(",", ": ")``, ``ensure_ascii=False``, ``allow_nan=True``, no sorting and
no ``default``. Anything outside the plain JSON types (dict, list, tuple, str, int, float, bool, None
and their subclasses as the standard encoder treats them), or a dict key it would coerce in an unusual
way, makes the whole call fall back to ``json.dumps`` itself, so odd input gets the standard library's
text or its error, never a different one.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring  # the C version when available, as json.dumps uses
from typing import Any

_INF = float("inf")


class _Fallback(Exception):
    """A value the fast path does not cover: `indented_json` hands the whole input to json.dumps."""


def indented_json(data: Any) -> str:
    """``json.dumps(data, ensure_ascii=False, indent=1)`` (module docstring)."""
    try:
        return _value(data, "\n")
    except (_Fallback, RecursionError):
        return json.dumps(data, ensure_ascii=False, indent=1)


def _float(o: float) -> str:
    """json's spelling of a float (allow_nan=True)."""
    if o != o:
        return "NaN"
    if o == _INF:
        return "Infinity"
    if o == -_INF:
        return "-Infinity"
    return float.__repr__(o)


def _key(k: Any) -> str:
    """A dict key as json writes it (strings as they are; numbers, bools and None as their JSON text)."""
    if type(k) is str or isinstance(k, str):
        return encode_basestring(k)
    if isinstance(k, float):
        return encode_basestring(_float(k))
    if k is True:
        return '"true"'
    if k is False:
        return '"false"'
    if k is None:
        return '"null"'
    if isinstance(k, int):
        return encode_basestring(int.__repr__(k))
    raise _Fallback  # json raises TypeError: let it say so


def _value(o: Any, newline: str) -> str:
    """`o` at the nesting whose line breaks are `newline` ("\\n" and one space per level). The exact
    built-in types go first by `type` (the records' data is all of them); subclasses take the
    isinstance path, in the standard encoder's order."""
    t = type(o)
    if t is str:
        return encode_basestring(o)
    if t is dict:
        if not o:
            return "{}"
        inner = newline + " "
        return ("{" + inner + ("," + inner).join([_key(k) + ": " + _value(v, inner) for k, v in o.items()])
                + newline + "}")
    if t is list:
        if not o:
            return "[]"
        inner = newline + " "
        return "[" + inner + ("," + inner).join([_value(v, inner) for v in o]) + newline + "]"
    if t is int:
        return int.__repr__(o)
    if o is None:
        return "null"
    if o is True:
        return "true"
    if o is False:
        return "false"
    if t is float:
        return _float(o)
    return _subclassed(o, newline)


def _subclassed(o: Any, newline: str) -> str:
    """`_value` of anything but the exact built-in types, tested as json.encoder tests them."""
    if isinstance(o, str):
        return encode_basestring(o)
    if isinstance(o, int):
        return int.__repr__(o)
    if isinstance(o, float):
        return _float(o)
    inner = newline + " "
    if isinstance(o, list | tuple):
        if not o:
            return "[]"
        return "[" + inner + ("," + inner).join([_value(v, inner) for v in o]) + newline + "]"
    if isinstance(o, dict):
        if not o:
            return "{}"
        return ("{" + inner + ("," + inner).join([_key(k) + ": " + _value(v, inner) for k, v in o.items()])
                + newline + "}")
    raise _Fallback  # json would call its default (a TypeError)
