"""`raa eval compare` of two presets, or two draws, of one file (or of A's and B's): `--preset` and `--draw` chose
the same preset and draw on both sides, so preset full against preset direct of one output (an ablation scored into
one `--out`) could not be compared at all, and a file of several presets was refused without saying how; two files
scored in different draws were refused under `--draw` ("no row of draw 1") without saying why or what to do.
`--preset-b` / `--draw-b` choose B's apart; the refusals name them. "no row of preset X" reads alike in compare and
draws (`evals.batch_rows.no_preset_rows`)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from evals.batch_rows import no_preset_rows
from evals.compare import CompareError, compare
from evals.draws import DrawsError, summarize_draws
from graph.cli import app
from tests.test_eval_compare import _draws
from tests.test_eval_compare_presets import _own_keys

runner = CliRunner()


def test_two_presets_of_one_file_are_compared_with_preset_b(tmp_path):
    m = _own_keys(tmp_path, "m", {("full", 0): {"v1": 0.9, "v2": 0.5}, ("direct", 0): {"v1": 0.1, "v2": 0.6}})
    with pytest.raises(CompareError, match=r"holds presets direct, full: .*--preset P --preset-b Q"):
        compare(m, m)
    c = compare(m, m, preset="full", preset_b="direct", pair_by="path")
    assert (c.n, c.preset, c.preset_b, c.a.rows, c.b.rows) == (2, "full", "direct", 2, 2)
    assert c.mean_diff == pytest.approx((0.8 - 0.1) / 2)
    assert c.pairs_scored_differently == 0  # the presets asked for are the comparison, not a confound
    res = runner.invoke(app, ["eval", "compare", str(m), str(m), "--preset", "full", "--preset-b", "direct",
                              "--pair-by", "path"])
    assert res.exit_code == 0, res.output
    assert "preset full of A, preset direct of B" in res.output and "scored by another preset" not in res.output
    assert "wins/ties/losses 1/0/1" in res.output
    # under score-batch's own key (it hashes the preset) nothing pairs: the hint says --pair-by path
    assert compare(m, m, preset="full", preset_b="direct").hint is not None
    with pytest.raises(CompareError, match=r"no row of preset 'motion' \(presets found: direct, full\)"):
        compare(m, m, preset="full", preset_b="motion")


def test_files_scored_in_different_draws_say_why_and_compare_with_draw_b(tmp_path):
    a = _draws(tmp_path, "a", {0: {"k1": 0.9, "k2": 0.6}})
    b = _draws(tmp_path, "b", {1: {"k1": 0.5, "k2": 0.8}})
    with pytest.raises(CompareError, match=r"no row of draw 1 \(draws found: 0\).*--draw-b.*raa eval draws"):
        compare(a, b, draw=1)
    c = compare(a, b, draw=0, draw_b=1)
    assert (c.n, c.draw, c.draw_b) == (2, 0, 1) and c.mean_diff == pytest.approx((0.4 - 0.2) / 2)
    assert c.pairs_draw_differs == 2
    plain = compare(a, b)  # one draw each: paired as they are, but the pairs of other draws are counted and said
    assert (plain.n, plain.pairs_draw_differs) == (2, 2)
    res = runner.invoke(app, ["eval", "compare", str(a), str(b)])
    assert res.exit_code == 0 and "2 of the 2 compared pairs are of different draws" in res.output, res.output
    res = runner.invoke(app, ["eval", "compare", str(a), str(b), "--draw", "0", "--draw-b", "1"])
    assert res.exit_code == 0 and "draw 0 of A, draw 1 of B" in res.output, res.output


def test_two_draws_of_one_file_are_compared_with_draw_b(tmp_path):
    f = _draws(tmp_path, "f", {0: {"k1": 0.9, "k2": 0.6}, 1: {"k1": 0.5, "k2": 0.8}})
    with pytest.raises(CompareError, match=r"appears in draws 0 and 1: .*--draw K.*--draw K --draw-b J"):
        compare(f, f)
    c = compare(f, f, draw=0, draw_b=1)
    assert (c.n, c.a.rows, c.b.rows) == (2, 2, 2) and c.mean_diff == pytest.approx((0.4 - 0.2) / 2)


def test_no_row_of_a_preset_reads_alike_in_compare_and_draws(tmp_path):
    m = _own_keys(tmp_path, "m", {("full", 0): {"v1": 0.9}, ("direct", 0): {"v1": 0.1}})
    said = no_preset_rows(m, "motion", ["direct", "full"])
    assert said == f"{m}: no row of preset 'motion' (presets found: direct, full)"
    with pytest.raises(CompareError) as compared:
        compare(m, m, preset="motion")
    with pytest.raises(DrawsError) as drawn:
        summarize_draws(m, "motion")
    assert str(compared.value).startswith(said) and str(drawn.value).startswith(said)


def test_no_row_of_draw_names_the_option_that_picked_it(tmp_path):
    a = _draws(tmp_path, "a", {0: {"k1": 0.9, "k2": 0.6}})
    b = _draws(tmp_path, "b", {1: {"k1": 0.5, "k2": 0.8}})
    with pytest.raises(CompareError) as missed_b:  # B's draw 2, from --draw-b: --draw picked A's alone
        compare(a, b, draw=0, draw_b=2)
    said = str(missed_b.value)
    assert said.startswith(f"{b}: no row of draw 2 (draws found: 1): --draw-b picks B's draw"), said
    assert "both files" not in said, said
    with pytest.raises(CompareError) as missed_a:
        compare(a, b, draw=3, draw_b=1)
    said = str(missed_a.value)
    assert said.startswith(f"{a}: no row of draw 3 (draws found: 0): --draw picks A's draw"), said
    assert "both files" not in said, said
    with pytest.raises(CompareError, match=r"no row of draw 1 \(draws found: 0\): --draw picks that draw of both"):
        compare(a, b, draw=1)  # no --draw-b: one draw for both, as before
