"""A score-batch output can hold several presets' rows of one manifest (`raa score-batch M --out A.jsonl --preset
full`, then `--preset direct` into the same file: score-batch's key hashes the preset). `raa eval compare` stopped
at "key 'k1' appears twice", as if the file held a contradiction, with no way to compare one preset of it; `raa
eval draws` names the presets and takes `--preset`. compare does the same now: the error names the presets and
the option, and `--preset NAME` compares that preset's rows of both files (a file without them is an error naming
the presets it holds)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from evals.compare import CompareError, compare
from graph.cli import app
from tests.test_eval_compare import _scores

runner = CliRunner()


def _two_presets(tmp: Path, name: str = "a", full=(0.9, 0.5), direct=(0.7, 0.4)) -> Path:
    """A score-batch output holding preset full's rows, then preset direct's, of one manifest (keys k1, k2)."""
    rows = [_scores(tmp, f"{name}_{preset}", dict(zip(("k1", "k2"), rewards, strict=True)), preset=preset)
            for preset, rewards in (("full", full), ("direct", direct))]
    both = tmp / f"{name}.jsonl"
    both.write_text("".join(r.read_text() for r in rows))
    return both


def test_a_file_of_two_presets_names_them_instead_of_a_duplicate(tmp_path):
    a, b = _two_presets(tmp_path), _scores(tmp_path, "b", {"k1": 0.5, "k2": 0.5})
    with pytest.raises(CompareError, match=r"key 'k1' is held by presets direct and full: .*--preset NAME"):
        compare(a, b)


def test_one_preset_of_the_file_is_compared(tmp_path):
    a, b = _two_presets(tmp_path), _two_presets(tmp_path, "b", full=(0.5, 0.5), direct=(0.5, 0.5))
    full, direct = compare(a, b, preset="full"), compare(a, b, preset="direct")
    assert (full.n, full.a.rows, full.b.rows, full.preset) == (2, 2, 2, "full")
    assert full.mean_diff == pytest.approx((0.4 + 0.0) / 2) and direct.mean_diff == pytest.approx((0.2 - 0.1) / 2)
    with pytest.raises(CompareError, match=r"no row of preset 'audit_no_gate' \(presets found: direct, full\)"):
        compare(a, b, preset="audit_no_gate")
    one = _scores(tmp_path, "one", {"k1": 0.5, "k2": 0.5})  # preset full only
    with pytest.raises(CompareError, match=r"one/scores.jsonl: no row of preset 'direct' \(presets found: full\)"):
        compare(a, one, preset="direct")
    assert compare(a, one, preset="full").n == 2
    res = runner.invoke(app, ["eval", "compare", str(a), str(b), "--preset", "full"])
    assert res.exit_code == 0, res.output
    assert "preset full of each file" in res.output and "wins/ties/losses 1/1/0" in res.output


def test_a_preset_and_draw_the_file_holds_apart_is_an_error(tmp_path):
    """--preset and --draw each held by the file, but not together (preset full at draw 0, direct at draw 1): each
    check passed, no row was left, and compare said "no rows in FILE: nothing to compare" (exit 0) of a file of
    rows, as if it were empty."""
    import json

    a = _two_presets(tmp_path)
    a.write_text("".join(json.dumps({**row, "draw": 1} if row["preset"] == "direct" else row) + "\n"
                         for row in map(json.loads, a.read_text().splitlines())))
    with pytest.raises(CompareError, match=r"no row of preset 'full' at draw 1 \(draws of preset full: 0\)"):
        compare(a, a, preset="full", draw=1)
    assert compare(a, a, preset="direct", draw=1).n == 2
    res = runner.invoke(app, ["eval", "compare", str(a), str(a), "--preset", "full", "--draw", "1"])
    assert res.exit_code == 2 and "no row of preset 'full' at draw 1" in res.output, res.output
