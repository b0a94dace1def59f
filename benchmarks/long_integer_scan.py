"""Time `tools.jsonl._long_integer_at`, the place `parsed_line` gives a JSON integer too long for Python's int
conversion, on a text of about 44 MB (rows of strings with escaped quotes, digits and numbers, the long integer last),
against the token-by-token scan it replaced (kept here as the baseline). Prints both times and checks both find the
same place. Run: `python -P benchmarks/long_integer_scan.py [MB]`."""

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


def main() -> None:
    text = text_of(float(sys.argv[1]) if len(sys.argv) > 1 else 44.0)
    times = {}
    for name, scan in (("token_scan", token_scan), ("long_integer_at", _long_integer_at)):
        start = time.perf_counter()
        place = scan(text)
        times[name] = time.perf_counter() - start
        assert place == text.rindex(", -") + 2, (name, place)
    print(f"text_mb {len(text) / 1e6:.1f}")
    for name, seconds in times.items():
        print(f"{name}_s {seconds:.3f}")


if __name__ == "__main__":
    main()
