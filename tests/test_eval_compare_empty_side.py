"""`raa eval compare` when a side has nothing to compare: honestly empty (exit 0, "no rows in FILE"), or empty
because its lines were skipped as no usable row (exit 2 naming the file, how many lines and why). The draw
`--draw K` asked for was "not found" while its lines had been skipped: the error said "draws found: 0" and
never mentioned them (the skipped lines are only listed once the comparison ran)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from graph.cli import app
from tests.test_eval_compare import _draws, _scores

runner = CliRunner()


def _torn(path, rows):
    """Rows of `path` whose reward is the string "0.9" (skipped: a scored row needs a number)."""
    lines = path.read_text().splitlines()
    for i in rows:
        row = json.loads(lines[i])
        row["result"] = {**row["result"], "reward": "0.9"}
        lines[i] = json.dumps(row)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_side_whose_every_line_was_skipped_exits_2_naming_the_file_count_and_reason(tmp_path):
    good = _scores(tmp_path, "good", {"k1": 0.5, "k2": 0.4})
    bad = _torn(_scores(tmp_path, "bad", {"k1": 0.5, "k2": 0.4}), [0, 1])
    res = runner.invoke(app, ["eval", "compare", str(good), str(bad)])
    assert res.exit_code == 2, res.output
    assert f"{bad}: no usable row: its 2 line(s) were all skipped" in res.stderr
    assert f"{bad}:1: a row with status 'scored' needs a finite number" in res.stderr
    assert "nothing to compare" not in res.stdout


def test_a_draw_whose_every_line_was_skipped_exits_2_naming_the_skipped_lines(tmp_path):
    a = _draws(tmp_path, "a", {0: {"k1": 0.9, "k2": 0.6}, 1: {"k1": 0.5, "k2": 0.8}})
    b = _draws(tmp_path, "b", {0: {"k1": 0.4, "k2": 0.6}, 1: {"k1": 0.5, "k2": 0.2}})
    _torn(a, [2, 3])  # both rows of draw 1
    res = runner.invoke(app, ["eval", "compare", str(a), str(b), "--draw", "1"])
    assert res.exit_code == 2, res.output
    assert f"{a}: no row of draw 1 (draws found: 0)" in res.stderr
    assert "2 line(s) were skipped as no usable row" in res.stderr
    assert f"{a}:3: a row with status 'scored' needs a finite number" in res.stderr
    res = runner.invoke(app, ["eval", "compare", str(a), str(b), "--draw", "2"])  # skipped lines named there too
    assert res.exit_code == 2 and "no row of draw 2 (draws found: 0)" in res.stderr and f"{a}:4" in res.stderr
    res = runner.invoke(app, ["eval", "compare", str(b), str(b), "--draw", "2"])  # nothing skipped: as before
    assert res.exit_code == 2 and "(draws found: 0, 1)" in res.stderr and "skipped" not in res.stderr


def test_an_honestly_empty_side_exits_0_even_when_the_other_side_had_skipped_lines(tmp_path):
    """No skipped line could have paired with a side that has no rows: its emptiness is honest (README)."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    b = _torn(_scores(tmp_path, "b", {"k1": 0.5, "k2": 0.4}), [1])
    res = runner.invoke(app, ["eval", "compare", str(empty), str(b)])
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith(f"no rows in {empty}: nothing to compare")
    assert f"skipped {b}:2: " in res.stderr
