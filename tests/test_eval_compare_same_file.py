"""`raa eval compare F F`: a results file compared with itself, the same rows on both sides, paired each row with
itself (every pair a tie, an interval [0, 0], no note): refused, naming the file and the options that compare two
batches of one file, which still run (`evals.compare`'s module docstring)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from evals.compare import CompareError, compare
from graph.cli import app
from tests.test_eval_compare import _scores

runner = CliRunner()


def test_a_file_compared_with_itself_is_refused(tmp_path):
    f = _scores(tmp_path, "a", {"k0": 0.2, "k1": 0.9})
    with pytest.raises(CompareError, match="the same file.*each row would pair with itself.*--preset-b.*--draw-b"):
        compare(f, f)


def test_another_name_of_the_file_is_the_same_file(tmp_path):
    f = _scores(tmp_path, "a", {"k0": 0.2, "k1": 0.9})
    (tmp_path / "link.jsonl").symlink_to(f)
    with pytest.raises(CompareError, match="the same file"):
        compare(f, tmp_path / "a" / ".." / "link.jsonl")
    with pytest.raises(CompareError, match="the same file"):  # options that choose the same rows on both sides
        compare(f, f, preset="full", preset_b="full")


def test_the_cli_exits_2_naming_the_file(tmp_path):
    f = _scores(tmp_path, "a", {"k0": 0.2, "k1": 0.9})
    result = runner.invoke(app, ["eval", "compare", str(f), str(f)])
    assert result.exit_code == 2, result.output
    assert "same file" in result.output and "mean" not in result.output


def test_two_draws_of_one_file_are_still_compared(tmp_path):
    f = _scores(tmp_path, "a", {"k0": 0.2, "k1": 0.9})
    rows = [json.loads(line) for line in f.read_text().splitlines()]
    again = [{**row, "draw": 1, "result": {**row["result"], "reward": 0.5}} for row in rows]
    f.write_text("".join(json.dumps(row) + "\n" for row in [*rows, *again]))
    result = compare(f, f, pair_by="path", draw=0, draw_b=1)
    assert result.n == 2 and result.wins == 1 and result.losses == 1
