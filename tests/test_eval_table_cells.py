"""Cells of the reliability table (`evals.table`): R with unjudged, skipped and never-judged rows, F+ and P0 with
ineligible rows, the judge's name in the header; the same in table.md, table.csv and summary.json."""

from __future__ import annotations


def test_r_cell_says_not_judged_only_when_no_row_was_judged():
    from evals.table import PresetMetrics

    def m(n, r, unjudged, skipped):
        return PresetMetrics(preset="full", n=n, r=r, unjudged=unjudged, skipped=skipped, n_neg=0, f_plus=0,
                             n_prog=0, p0=0, ineligible=skipped)

    assert m(3, 0, 2, 1).r_cell == "not judged (N = 3)"
    assert m(3, 0, 2, 0).r_cell == "0 / 3 (0.0%; 2 unjudged)"  # one row judged and rejected, two not judged
    assert m(4, 3, 0, 1).r_cell == "3 / 4 (75.0%)"
    assert m(0, 0, 0, 0).r_cell == "no rows"  # no R at all (tests/test_eval_table_no_rows.py)
    # every output ineligible: none was accepted, so R is 0 / N (it read "not judged", like a missing judge)
    assert m(3, 0, 0, 3).r_cell == "0 / 3 (0.0%)" and not m(3, 0, 0, 3).not_judged


def test_unjudged_rows_are_named_next_to_r_in_every_output():
    """10 rows, 1 judged unreasonable, 9 unjudged read "0 / 10 (0.0%)", as if the judge had rejected all 10;
    table.csv and summary.json gave the same bare 0.0."""
    import csv
    import io

    from evals.table import metrics_as_dicts, preset_metrics, render_csv, render_markdown

    rows = [{"preset": "full", "label": "failure", "reward": 0.0, "judge": {"status": "judged", "reasonable": False}}]
    rows += [{"preset": "full", "label": "progress", "reward": 0.5, "judge": {"status": "unjudged"}}] * 9
    m = preset_metrics("full", rows)
    assert m.r_cell == "0 / 10 (0.0%; 9 unjudged)" and not m.not_judged
    assert "| Full Reward Agent | 0 / 10 (0.0%; 9 unjudged) |" in render_markdown([m])
    header, line = render_csv([m]).splitlines()[:2]
    assert header.startswith("preset,method,n,r,r_pct,unjudged,skipped,")  # the count beside the percentage
    row = next(csv.DictReader(io.StringIO(render_csv([m]))))
    assert (row["r"], row["r_pct"], row["unjudged"]) == ("0", "0.00", "9")
    summary = metrics_as_dicts([m])[0]
    assert summary["unjudged"] == 9 and summary["r_cell"] == "0 / 10 (0.0%; 9 unjudged)"
    judged = preset_metrics("full", rows[:1])
    assert judged.r_cell == "0 / 1 (0.0%)" and metrics_as_dicts([judged])[0]["r_cell"] == "0 / 1 (0.0%)"


def test_unmeasured_r_and_ineligible_rows_are_visible_in_every_output():
    """table.csv and summary.json wrote R% = 0.00 for a preset never judged; F+ and P0 cells of a preset whose
    outputs were ineligible looked perfect (an ineligible row is neither a false positive nor a zero)."""
    import csv
    import io

    from evals.table import metrics_as_dicts, preset_metrics, render_csv, render_markdown

    rows = [{"preset": "full", "label": "failure", "reward": None, "judge": {"status": "skipped"}},
            {"preset": "full", "label": "failure", "reward": 0.4, "judge": {"status": "unjudged"}},
            {"preset": "full", "label": "progress", "reward": None, "judge": {"status": "skipped"}}]
    m = preset_metrics("full", rows)
    assert (m.f_cell, m.p_cell) == ("1 / 2 (1 ineligible)", "0 / 1 (1 ineligible)")
    assert "| Full Reward Agent | not judged (N = 3) | 1 / 2 (1 ineligible) | 0 / 1 (1 ineligible) |" in \
        render_markdown([m])
    row = next(csv.DictReader(io.StringIO(render_csv([m]))))
    assert row["r_pct"] == "" and (row["neg_ineligible"], row["prog_ineligible"]) == ("1", "1")
    assert metrics_as_dicts([m])[0]["r_pct"] is None and metrics_as_dicts([m])[0]["not_judged"] is True


def test_a_pipe_in_the_judge_name_stays_in_its_cell():
    from evals.table import preset_metrics, render_markdown

    m = preset_metrics("full", [{"preset": "full", "label": "failure", "reward": 0.0}])
    header = render_markdown([m], judge_name="org/judge|v2").splitlines()[0]
    assert header.startswith("| Method | R / N (%) ↑ (org/judge\\|v2) |") and header.count(" | ") == 3


def test_rows_without_a_verdict_count_as_the_judge_would_have_said():
    """Rows written without a verdict (another tool's results): one with no reward is skipped (nothing to
    judge), as the judge says of it, not unjudged; one with a reward is unjudged."""
    from evals.table import preset_metrics

    rows = [{"preset": "full", "label": "failure", "reward": None},
            {"preset": "full", "label": "failure", "reward": 0.0, "judge": None},
            {"preset": "full", "label": "progress", "reward": 0.5, "judge": {"status": "judged", "reasonable": True}}]
    m = preset_metrics("full", rows)
    assert (m.r, m.unjudged, m.skipped) == (1, 1, 1)
    assert m.r_cell == "1 / 3 (33.3%; 1 unjudged)"


def test_not_judged_preset_has_no_r_count_in_csv_or_summary():
    """table.csv gave a preset never judged r = 0 beside an empty r_pct (summary.json: r 0, r_pct null), which
    reads as a judge rejecting every output; table.md says "not judged". Both are empty / null now."""
    import csv
    import io

    from evals.table import metrics_as_dicts, preset_metrics, render_csv

    rows = [{"preset": "full", "label": "ordinary", "reward": 0.4, "judge": {"status": "unjudged"}},
            {"preset": "full", "label": "failure", "reward": None, "judge": {"status": "skipped"}}]
    m = preset_metrics("full", rows)
    assert m.not_judged
    row = next(csv.DictReader(io.StringIO(render_csv([m]))))
    assert (row["r"], row["r_pct"], row["unjudged"], row["skipped"]) == ("", "", "1", "1")
    d = metrics_as_dicts([m])[0]
    assert d["r"] is None and d["r_pct"] is None and d["not_judged"] is True
    judged = preset_metrics("full", [{**rows[0], "judge": {"status": "judged", "reasonable": False}}])
    row = next(csv.DictReader(io.StringIO(render_csv([judged]))))
    assert (row["r"], row["r_pct"]) == ("0", "0.00") and metrics_as_dicts([judged])[0]["r"] == 0
