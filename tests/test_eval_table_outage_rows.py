"""The reward table counted a row an outage of the reward machinery made ineligible (an endpoint down, a tool or
the scorer crashed: `graph.schemas.Fault.outage`) in R's denominator and in n_neg / n_prog: a preset whose
endpoint went down for 3 of 10 clips read "4 / 10 (40.0%)", as if its agent had failed them, and two presets
that lost different clips were compared over different clips without a word. Outage rows are now left out of
R / N, F+ / n_neg and P0 / n_prog (counted apart, as `evals.vqa` leaves them out of Domain), and the table says
which presets are incomplete."""

from __future__ import annotations

import csv
import io

from evals.table import incomplete_notes, metrics_as_dicts, preset_metrics, render_csv, render_markdown

OUTAGE = [{"stage": "observe", "kind": "transport", "message": "endpoint down"}]
OWN = [{"stage": "observe", "kind": "invalid_reply", "message": "no JSON in the reply"}]
SKIPPED = {"status": "skipped"}


def _row(path, label, reward, reasonable=None, faults=None):
    judge = SKIPPED if reward is None else {"status": "judged", "reasonable": reasonable}
    return {"preset": "full", "path": path, "label": label, "reward": reward, "judge": judge,
            "faults": faults or []}


def _rows():
    return [_row("n1", "failure", 0.5, False), _row("n2", "failure", 0.0, True), _row("n3", "failure", None, faults=OUTAGE),
            _row("n4", "unobservable", None, faults=OWN),
            _row("p1", "progress", 0.0, False), _row("p2", "progress", 0.6, True), _row("p3", "progress", None, faults=OUTAGE),
            _row("p4", "progress", None, faults=OWN),
            _row("o1", "ordinary", 0.7, True), _row("o2", "ordinary", None, faults=OUTAGE)]


def test_outage_rows_are_left_out_of_r_f_plus_and_p0():
    m = preset_metrics("full", _rows())
    assert (m.n, m.r, m.ineligible, m.outage) == (10, 3, 5, 3)
    assert m.r_cell == "3 / 7 (42.9%; 3 outage not counted)"  # it read "3 / 10 (30.0%)"
    assert m.f_cell == "1 / 3 (1 ineligible; 1 outage not counted)"  # it read "1 / 4 (2 ineligible)"
    assert m.p_cell == "1 / 3 (1 ineligible; 1 outage not counted)"
    assert m.ineligible_cell == "5 (3 outage)"
    md = render_markdown([m])
    assert "| Full Reward Agent | 3 / 7 (42.9%; 3 outage not counted) | 1 / 3 (1 ineligible; 1 outage not counted) |" in md
    (line,) = csv.DictReader(io.StringIO(render_csv([m])))
    assert (line["n"], line["n_r"], line["r"], line["r_pct"]) == ("10", "7", "3", "42.86")
    assert (line["n_neg"], line["neg_outage"], line["n_prog"], line["prog_outage"]) == ("4", "1", "4", "1")
    d = metrics_as_dicts([m])[0]
    assert d["n_r"] == 7 and abs(d["r_pct"] - 300 / 7) < 1e-9 and d["complete"] is False
    assert d["outage_paths"] == ["n3", "o2", "p3"]


def test_without_outage_the_cells_are_as_before():
    rows = [r for r in _rows() if r["faults"] != OUTAGE]
    m = preset_metrics("full", rows)
    assert (m.r_cell, m.f_cell, m.p_cell) == ("3 / 7 (42.9%)", "1 / 3 (1 ineligible)", "1 / 3 (1 ineligible)")
    assert metrics_as_dicts([m])[0]["complete"] is True and not incomplete_notes([m])
    assert "Incomplete" not in render_markdown([m])


def test_a_preset_every_row_of_which_an_outage_took_has_no_r():
    m = preset_metrics("full", [_row(f"c{i}", "failure", None, faults=OUTAGE) for i in range(3)])
    assert m.r_cell == "no result (N = 3, all lost to an outage)"  # it read "0 / 3 (0.0%)"
    assert m.f_cell == "0 / 0 (3 outage not counted)"
    (line,) = csv.DictReader(io.StringIO(render_csv([m])))
    assert (line["r"], line["r_pct"], line["n_r"]) == ("", "", "0")
    d = metrics_as_dicts([m])[0]
    assert d["r"] is None and d["r_pct"] is None and d["complete"] is False


def test_not_judged_counts_the_rows_left_after_the_outage():
    rows = [{**_row("a", "ordinary", 0.5), "judge": {"status": "unjudged"}}, _row("b", "ordinary", None, faults=OUTAGE)]
    assert preset_metrics("full", rows).r_cell == "not judged (N = 1; 1 outage not counted)"


def test_presets_that_lost_different_clips_are_said_to_cover_different_clips():
    full = preset_metrics("full", _rows())
    direct = preset_metrics("direct", [{**r, "preset": "direct"} for r in _rows() if r["path"] != "o2"])
    notes = incomplete_notes([direct, full])
    assert notes[0].startswith("incomplete: direct lost 2 of 9 rows, full 3 of 10, to an outage of the reward "
                               "machinery")
    assert "different clips" in notes[-1]
    same = incomplete_notes([preset_metrics("direct", [{**r, "preset": "direct"} for r in _rows()]), full])
    assert len(same) == 1 and "different clips" not in same[0]
    md = render_markdown([direct, full])
    assert all(f"{n[0].upper()}{n[1:]}." in md for n in notes)  # under the first table


def test_eval_reward_says_so_in_table_md_summary_console_and_report_page(tmp_path):
    """End to end: c6 of `full` lost to an endpoint outage, c5 ineligible through the model's own reply."""
    import asyncio
    import json

    from evals.eval_views import reward_notes
    from evals.reliability import run_reward_eval
    from evals.report_index import write_eval_index
    from tests.test_eval_outages import FaultScorer
    from tests.test_eval_reliability import _clips, _judge

    out = asyncio.run(run_reward_eval(_clips(tmp_path), ["full"], tmp_path / "ev", FaultScorer(), _judge(),
                                      concurrency=1))
    md = (tmp_path / "ev" / "table.md").read_text()
    assert "| Full Reward Agent | 4 / 5 (80.0%; 1 outage not counted) | 0 / 3 | 0 / 1 (1 ineligible; 1 outage not " \
           "counted) |" in md
    assert "Incomplete: full lost 1 of 6 rows, to an outage" in md
    summary = json.loads((tmp_path / "ev" / "summary.json").read_text())["metrics"][0]
    assert (summary["n"], summary["n_r"], summary["r"], summary["complete"]) == (6, 5, 4, False)
    assert summary["outage_paths"] == [str(tmp_path / "c6.mp4")]
    assert reward_notes(out)[0].startswith("incomplete: full lost 1 of 6 rows")
    html = write_eval_index(tmp_path / "ev").read_text()
    assert "4 / 5 (80.0%; 1 outage not counted)" in html and "incomplete: full lost 1 of 6 rows" in html
