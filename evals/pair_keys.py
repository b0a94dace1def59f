"""The key `raa eval compare` pairs two rows by (`evals.compare_rows.read_results`): the JSON value of the row's field, a
string or a finite number. Split from evals/compare.py (its size).

Decisions where the issue was silent:
- Pairing is by JSON value, type and all: the number 1 and the string "1" are two keys. Keys were compared as text,
  so a hand-edited key of 1 paired with "1", true with "True", the JSON number 1.0 did not pair with 1, and a file
  holding both 1 and "1" read as one key "appearing twice". The same refusal of a type confusion as the instruction
  5 read as "5" (`evals.batch_rows.score_batch_row`).
- A number is a number however it is written: 1 and 1.0 are one key (1 as shown).
- A key that is no string and no finite number (true, null, a list, an object, NaN, Infinity) is no key: its line is
  skipped and named (`tools.jsonl.LineError`), as a draw that is no integer is. A bool is no number here (true is 1
  in Python).
- Keys are taken in their text's order, numbers before strings (`key_order`): the order the pairs were taken in
  while keys were text, for files whose keys are all strings or all whole numbers.
- With no pair at all, `text_twins` counts the keys of one side that match a key of the other as text only, so the
  comparison's hint can say that one side's keys are numbers and the other's strings.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from tools.jsonl import LineError

PairKey = str | int | float
"""A pairing key: a string, or a number (whole numbers as int)."""


def pair_key(where: str, value: Any, pair_by: str) -> PairKey:
    """The key of a row whose field `pair_by` holds `value` (not None); `LineError` naming `where` when it is no
    string and no finite number (module docstring)."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value) if value.is_integer() else value
    raise LineError(f"{where}: {pair_by} {value!r} is no key to pair by (it must be a string or a finite number)")


def key_order(key: PairKey) -> tuple[bool, str]:
    """Sort key of pairing keys: numbers before strings, each by its text (module docstring)."""
    return isinstance(key, str), str(key)


def text_twins(keys_a: Iterable[PairKey], keys_b: Iterable[PairKey]) -> int:
    """How many keys of A match a key of B as text but not as a value (1 and "1")."""
    b = set(keys_b)
    text_b = {str(k) for k in b}
    return sum(1 for k in keys_a if k not in b and str(k) in text_b)
