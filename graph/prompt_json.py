"""The JSON the prompts show a record in (`graph.nodes.common.dump`): exactly what
`json.dumps(value, ensure_ascii=False, indent=1)` writes, built faster.

With `indent` set, the standard library encodes in pure Python (its C encoder takes no indent on 3.11): a
generator per nested value, ~4 us per record field. The prompts of a full run dump the contract, the assessment and
the observation 13 times (assess, inspect, reflect, audit, final check), 6% of the event loop's CPU in
`benchmarks/agent_concurrency.py`. This writes the same text with one recursive function, the strings through
the standard library's own C string encoder (`json.encoder.encode_basestring`), 2.5-3x faster. Anything it does
not write the same way (a key that is not a string, a value of another type) goes to `json.dumps` whole, so the
text never differs (tests/test_prompt_json.py compares the two).
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring
from typing import Any


class _Other(Exception):
    """A value `_write` leaves to `json.dumps`."""


def _float(value: float) -> str:
    """`json.dumps`'s float text (allow_nan: NaN, Infinity, -Infinity)."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)


def _write(value: Any, depth: int, out: list[str]) -> None:
    # the checks in json.encoder's order (str, None, True, False, int, float, list / tuple, dict)
    if isinstance(value, str):
        out.append(encode_basestring(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        out.append(_float(value))
    elif isinstance(value, list | tuple):
        if not value:
            out.append("[]")
            return
        pad = "\n" + " " * (depth + 1)
        out.append("[")
        for n, item in enumerate(value):
            out.append(pad if n == 0 else "," + pad)
            _write(item, depth + 1, out)
        out.append("\n" + " " * depth + "]")
    elif isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        pad = "\n" + " " * (depth + 1)
        out.append("{")
        for n, (key, item) in enumerate(value.items()):
            if not isinstance(key, str):  # json.dumps turns some keys into strings, and refuses others
                raise _Other
            out.append(pad if n == 0 else "," + pad)
            out.append(encode_basestring(key))
            out.append(": ")
            _write(item, depth + 1, out)
        out.append("\n" + " " * depth + "}")
    else:
        raise _Other


def indented_json(value: Any) -> str:
    """`json.dumps(value, ensure_ascii=False, indent=1)` (module docstring)."""
    out: list[str] = []
    try:
        _write(value, 0, out)
    except _Other:
        return json.dumps(value, ensure_ascii=False, indent=1)
    return "".join(out)
