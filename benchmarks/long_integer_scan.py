"""Time `tools.jsonl._long_integer_at`, the place `parsed_line` gives a JSON integer too long for Python's int
conversion, against the token-by-token scan it replaced (kept here as the baseline), on two texts: `rows`, about 44 MB
of rows of strings with escaped quotes, digits and numbers, the long integer last; and `backslashes`, one string of
escaped backslashes (and an escaped quote) of about 1 MB before the long integer, the case that counted escapes one
by one. Prints each time and the baseline's time over the scan's (`ratio`), and checks both find the same place.
Run: `python -P benchmarks/long_integer_scan.py [MB] [BACKSLASH_MB]`."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools.jsonl import _long_integer_at  # noqa: E402

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?')


def token_scan(text: str) -> int:
    """The scan before: every string and number token matched in turn."""
    limit = sys.get_int_max_str_digits()
    for token in _TOKEN.finditer(text):
        if token[0][0] != '"' and len(token[0].lstrip("-")) > limit and token[0].lstrip("-").isdigit():
            return token.start()
    return 0


def text_of(mb: float) -> str:
    row = {"path": "clips/clip_000.mp4", "instruction": 'push the "red" block \\ to the right 12345', "reward": 0.5,
           "n": 12, "e": -1.5e-3}
    one = json.dumps(row)
    rows = int(mb * 1e6 / (len(one) + 2))
    return "[" + ", ".join([one] * rows) + ", -" + "9" * (sys.get_int_max_str_digits() + 1) + "]"


def backslash_text(mb: float) -> str:
    """A row whose one string holds `mb` MB of escaped backslashes and an escaped quote, the long integer after it."""
    pairs = int(mb * 1e6 / 2)
    return '["' + "\\\\" * pairs + '\\" end", -' + "9" * (sys.get_int_max_str_digits() + 1) + "]"


def main() -> None:
    texts = {"rows": text_of(float(sys.argv[1]) if len(sys.argv) > 1 else 44.0),
             "backslashes": backslash_text(float(sys.argv[2]) if len(sys.argv) > 2 else 1.0)}
    for case, text in texts.items():
        times = {}
        for name, scan in (("token_scan", token_scan), ("long_integer_at", _long_integer_at)):
            start = time.perf_counter()
            place = scan(text)
            times[name] = time.perf_counter() - start
            assert place == text.rindex(", -") + 2, (case, name, place)
        print(f"{case}_text_mb {len(text) / 1e6:.1f}")
        for name, seconds in times.items():
            print(f"{case}_{name}_s {seconds:.4f}")
        print(f"{case}_ratio {times['token_scan'] / times['long_integer_at']:.1f}")


if __name__ == "__main__":
    main()
