"""`raa eval compare` pairs rows by the JSON value of their field, not its text: a key of 1 (a hand edit, a manifest
another tool wrote) paired with "1", a key true with "True", and a key 1.0 did not pair with 1 (the same JSON
number); within one file 1 and "1" read as one key "appearing twice". A key that is no string or finite number
(true, a list, an object, NaN) is no key: its line is skipped and named, as a draw that is no integer is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evals.compare import CompareError, compare
from graph.cli import app


def _row(key, reward: float, name: str | None = None) -> dict:
    return {"key": f"k-{name or key}", "path": f"/v/{name or key}.mp4", "instruction": "stack", "preset": "full",
            "manifest": {"key": key}, "result": {"status": "scored", "reward": reward, "reasons": [], "faults": []}}


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_number_key_does_not_pair_with_its_text(tmp_path):
    a = _write(tmp_path / "a.jsonl", [_row(1, 0.9, "a1")])
    b = _write(tmp_path / "b.jsonl", [_row("1", 0.4, "b1")])
    c = compare(a, b)
    assert (c.pairs, c.unpaired_a, c.unpaired_b, c.n) == (0, 1, 1, 0)
    assert c.hint is not None and "1 key(s) are the same as text" in c.hint and "number" in c.hint, c.hint


def test_the_same_number_pairs_whether_written_1_or_1_0(tmp_path):
    a = _write(tmp_path / "a.jsonl", [_row(1, 0.9, "a1"), _row(2, 0.5, "a2")])
    b = _write(tmp_path / "b.jsonl", [_row(1.0, 0.4, "b1"), _row(2, 0.5, "b2")])
    c = compare(a, b)
    assert (c.pairs, c.n, c.unpaired_a, c.unpaired_b) == (2, 2, 0, 0)
    assert c.mean_diff == pytest.approx(0.25)


def test_one_file_may_hold_1_and_text_1_as_two_keys(tmp_path):
    a = _write(tmp_path / "a.jsonl", [_row(1, 0.9, "a1"), _row("1", 0.7, "a1s")])
    b = _write(tmp_path / "b.jsonl", [_row(1, 0.4, "b1"), _row("1", 0.2, "b1s")])
    c = compare(a, b)
    assert (c.pairs, c.n) == (2, 2)
    assert c.mean_diff == pytest.approx(0.5)


def test_a_repeated_key_is_named_with_its_type(tmp_path):
    a = _write(tmp_path / "a.jsonl", [_row(1, 0.9, "x"), _row(1, 0.7, "y")])
    b = _write(tmp_path / "b.jsonl", [_row(1, 0.4, "z")])
    with pytest.raises(CompareError, match=r"key 1 appears twice"):
        compare(a, b)


@pytest.mark.parametrize("key,shown", [(True, "True"), ([1], "[1]"), ({"p": 1}, "{'p': 1}"),
                                       (float("nan"), "nan"), (float("inf"), "inf")])
def test_a_key_that_is_no_string_or_number_is_skipped_and_named(tmp_path, key, shown):
    a = _write(tmp_path / "a.jsonl", [_row("True" if key is True else "1", 0.9, "a1"), _row(key, 0.8, "a2")])
    b = _write(tmp_path / "b.jsonl", [_row("True" if key is True else "1", 0.4, "b1")])
    c = compare(a, b)
    assert (c.pairs, c.a.rows) == (1, 1)
    assert [s.line for s in c.a.skipped_lines] == [f"{a}:2"]
    reason = c.a.skipped_lines[0].reason
    assert shown in reason and "a string or a finite number" in reason, reason


def test_cli_names_the_key_as_its_type(tmp_path):
    """The instruction-mismatch warning shows 1 and "1" apart (its JSON keeps the key's type)."""
    a = _write(tmp_path / "a.jsonl", [_row(7, 0.9, "a")])
    b = _write(tmp_path / "b.jsonl", [{**_row(7, 0.4, "b"), "instruction": "push"}])
    out = tmp_path / "c.json"
    res = CliRunner().invoke(app, ["eval", "compare", str(a), str(b), "--json", str(out)], terminal_width=300)
    assert res.exit_code == 0, res.output
    assert "(first: key 7)" in " ".join(res.output.split()), res.output
    assert json.loads(out.read_text())["first_instruction_mismatch"] == 7
