"""A JSON integer longer than Python's int conversion limit (`sys.get_int_max_str_digits`, 4300 digits: a hand edit or
another tool's output) makes `json.loads` raise a plain ValueError, not JSONDecodeError: `tools.jsonl.usable_rows`
let it out as a traceback (out of `raa eval compare`, `raa eval draws`, `raa eval reward`'s results reader) and
`json_lines` raised it bare instead of its caller's error naming the line. Such a line is a bad line like any other."""

from __future__ import annotations

import json
import sys

import pytest

from evals.compare import compare
from tests.test_eval_compare import _scores
from tools.jsonl import json_lines, usable_rows

LONG = "9" * (sys.get_int_max_str_digits() + 1)


class Refused(ValueError):
    pass


def test_usable_rows_skips_a_line_with_a_too_long_number_naming_it(tmp_path):
    f = tmp_path / "rows.jsonl"
    f.write_text('{"a": 1}\n{"a": ' + LONG + '}\n{"a": 3}\n')
    rows, skipped = usable_rows(f, lambda where, row: row["a"])
    assert rows == [1, 3]
    assert [s.line for s in skipped] == [f"{f}:2"]
    assert skipped[0].reason.startswith("not valid JSON (a number of more than"), skipped[0].reason


def test_json_lines_raises_its_callers_error_for_a_too_long_number(tmp_path):
    f = tmp_path / "rows.jsonl"
    f.write_text('{"a": 1}\n{"a": ' + LONG + '}\n')
    with pytest.raises(Refused, match=rf"^{f}:2: not valid JSON \(a number of more than"):
        list(json_lines(f, Refused))


def test_compare_skips_a_results_line_with_a_too_long_reward(tmp_path):
    odd, good = _scores(tmp_path, "odd", {"k1": 0.5, "k2": 0.4}), _scores(tmp_path, "good", {"k1": 0.5, "k2": 0.4})
    rows = odd.read_text().splitlines()
    rows[1] = rows[1].replace('"reward": 0.4', '"reward": ' + LONG)
    assert LONG in rows[1]
    odd.write_text("\n".join(rows) + "\n")
    c = compare(odd, good)
    assert [s.line for s in c.a.skipped_lines] == [f"{odd}:2"] and (c.a.rows, c.n) == (1, 1)
    assert json.loads(rows[0])  # the other line still reads


def test_parsed_line_names_the_column_of_the_too_long_number():
    """The error's place was char 0 ("column 1") wherever the number stood; a run of digits inside a string before it
    is no number."""
    from tools.jsonl import parsed_line

    text = '{"s": "' + LONG + '", "b": ' + LONG + '}'
    with pytest.raises(json.JSONDecodeError) as caught:
        parsed_line(text)
    assert (caught.value.lineno, caught.value.colno) == (1, text.index(', "b": ') + 8)
    whole = '{\n  "a": [1.5, -' + LONG + ']\n}'
    with pytest.raises(json.JSONDecodeError) as caught:
        parsed_line(whole)
    assert (caught.value.lineno, caught.value.colno) == (2, 14)  # its minus sign


def test_score_batch_manifest_line_names_the_column_of_a_too_long_number(tmp_path):
    from graph.batch_manifest import read_manifest

    m = tmp_path / "m.jsonl"
    m.write_text('{"path": "a.mp4", "instruction": "x", "n": ' + LONG + '}\n')
    [item] = read_manifest(m, "full")
    assert item["error"].endswith("digits at column 44)"), item["error"]


@pytest.mark.parametrize("before", [
    '"' + LONG + '"',  # digits in a string
    '"a\\"' + LONG + '\\"b"',  # ... between escaped quotes
    '"a\\\\", ' + '"' + LONG + '"',  # an escaped backslash ending a string, then digits in the next one
    '"\\u0041' + LONG + '"',  # digits after a \u escape
    '{"' + LONG + '": 1}',  # a key
    "1." + LONG,  # a fraction: a float, which has no digit limit
    LONG + ".5",
    LONG + "e5",
    "1e" + LONG,  # exponents
    "1E-" + LONG,
    "-1e+" + LONG,
    "-0.5",
    '"caf\u00e9 \U0001f3ac \u2028 ' + LONG + '"',  # characters of 2, 4 and 3 UTF-8 bytes: the place counts characters
])
def test_the_too_long_integer_is_found_after_digits_that_are_no_such_integer(before):
    """Where the number stands, whatever comes before it (`tools.jsonl._long_integer_at`): the place is the error's."""
    from tools.jsonl import parsed_line

    for number in (LONG, "-" + LONG):
        text = '[' + before + ', \n ' + number + ', 1]'
        with pytest.raises(json.JSONDecodeError) as caught:
            parsed_line(text)
        assert (caught.value.lineno, caught.value.colno, caught.value.pos) == (2, 2, text.index("\n") + 2), before


def test_a_too_long_integer_at_the_very_start_is_found():
    from tools.jsonl import parsed_line

    with pytest.raises(json.JSONDecodeError) as caught:
        parsed_line(LONG)
    assert caught.value.pos == 0
    with pytest.raises(json.JSONDecodeError) as caught:
        parsed_line('  -' + LONG)
    assert caught.value.pos == 2


def test_backslash_heavy_text_places_the_long_integer():
    """A megabyte of escaped backslashes before the number (a Windows path pasted a thousand times): the escapes are
    paired from each run's start, so the escaped quote after an odd run ends no string, and the number after an even
    run's closing quote is outside every string (`benchmarks/long_integer_scan.py` times it)."""
    import sys

    from tools.jsonl import _long_integer_at

    number = "9" * (sys.get_int_max_str_digits() + 1)
    text = '["' + "\\\\" * 500_000 + '", ' + number + "]"
    assert _long_integer_at(text) == text.index(number)
    inside = '["' + "\\\\" * 500_000 + '\\" ' + number + '", ' + number + "]"  # the first number is a string's
    assert _long_integer_at(inside) == inside.rindex(number)
    cut = '["a\\\\\\"' + number + '", -' + number + "]"  # three backslashes and a quote: still inside
    assert _long_integer_at(cut) == cut.rindex("-")
    single = '["a\\"' + number + '", "b\\\\ c", ' + number + "]"  # no quote after two backslashes
    assert _long_integer_at(single) == single.rindex(number)
