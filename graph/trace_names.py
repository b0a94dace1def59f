"""Strings that are not valid Unicode in traces: file names that are not UTF-8.

A clip whose name is not UTF-8 (a Latin-1 "café" made on another system) reaches Python as a str holding its
undecodable bytes as lone surrogates (PEP 383, surrogateescape). LangGraph's msgpack serializer wrote each such
character as "?", so the trace named another file, and `raa report` / `raa trace` could not find the clip.

Decisions where the issue was silent: `SurrogateSafeSerializer` writes such a string, wherever it sits in plain
dicts, lists and tuples of a checkpoint or a pending write (the state's "video", a step's fields), as `MARK`
followed by its JSON form (which escapes a lone surrogate as "\\udcff"), and turns it back on reading. `MARK` begins
with a NUL character, which no file name and no text the agent writes contains. Strings inside other objects
(pydantic records such as the RewardResult, messages) are left to the serializer as before: a reason naming such
a file still shows "?". Values without such strings are written byte for byte as before.
"""

from __future__ import annotations

import json
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

MARK = "\x00raa-surrogates:"
_MARK_BYTES = MARK.encode()


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def escape(value: Any) -> Any:
    """`value` with each string holding lone surrogates (in plain dicts, lists, tuples) replaced by its marked JSON
    form; the same object when there is none."""
    if isinstance(value, str):
        return MARK + json.dumps(value) if _has_surrogates(value) else value
    if type(value) is dict:
        pairs = [(escape(k), escape(v)) for k, v in value.items()]
        changed = any(k2 is not k or v2 is not v for (k2, v2), (k, v) in zip(pairs, value.items(), strict=True))
        return dict(pairs) if changed else value
    if type(value) in (list, tuple):
        out = [escape(v) for v in value]
        if any(a is not b for a, b in zip(out, value, strict=True)):
            return out if type(value) is list else tuple(out)
        return value
    return value


def unescape(value: Any) -> Any:
    """`escape` undone."""
    if isinstance(value, str):
        return json.loads(value[len(MARK):]) if value.startswith(MARK) else value
    if type(value) is dict:
        return {unescape(k): unescape(v) for k, v in value.items()}
    if type(value) is list:
        return [unescape(v) for v in value]
    if type(value) is tuple:
        return tuple(unescape(v) for v in value)
    return value


class SurrogateSafeSerializer(JsonPlusSerializer):
    """The trace serializer: strings with lone surrogates round-trip (module docstring)."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return super().dumps_typed(escape(obj))

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        value = super().loads_typed(data)
        return unescape(value) if isinstance(data[1], bytes | bytearray) and _MARK_BYTES in data[1] else value
