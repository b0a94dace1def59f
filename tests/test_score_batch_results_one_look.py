"""`raa eval draws` and `raa eval compare` take a score-batch output from one look at it
(`evals.batch_rows.read_results_file`): each asked whether the file was there (`results_file_problem`, a stat), then
read it by name. Removed in between, the read's bare FileNotFoundError escaped (a traceback from the CLI) where a
missing file is the command's error, "results file not found"."""

from __future__ import annotations

from evals.compare import CompareError, compare
from evals.draws import DrawsError, summarize_draws
from tests.path_calls import removed_after_first_look
from tests.test_eval_compare import _scores
from tests.test_eval_draws import _draws


def test_draws_of_an_output_removed_after_the_first_look_are_read_whole_or_not_found(tmp_path, monkeypatch):
    out = _draws(tmp_path)
    seen = removed_after_first_look(monkeypatch, out)
    try:
        summary = summarize_draws(out)
    except DrawsError as exc:
        assert str(exc) == f"results file not found: {out}"
    else:
        assert seen and summary.clips > 0, seen
    assert not out.exists()


def test_a_compared_output_removed_after_the_first_look_is_read_whole_or_not_found(tmp_path, monkeypatch):
    a = _scores(tmp_path, "a", {"k1": 0.5, "k2": 0.25})
    b = _scores(tmp_path, "b", {"k1": 0.75, "k2": 0.25})
    seen = removed_after_first_look(monkeypatch, a)
    try:
        comparison = compare(a, b)
    except CompareError as exc:
        assert str(exc) == f"results file not found: {a}"
    else:
        assert seen and comparison.pairs == 2, seen
    assert not a.exists()
