"""R / N, F+ / n_neg and P0 / n_prog leave the rows an outage of the reward machinery took out of their
denominators (`evals.table`), but two other figures of the same table still counted them:

- the mean reward by label and by pattern showed "(rewarded/rows)" with the outage rows in "rows": a preset whose
  endpoint went down for a failure clip read "0.250 (2/3)", as if the preset had left one of its own outputs
  unscored, beside an F+ cell that said the row was not counted;
- usage per clip averaged the outage rows' usage in: a run stopped by an endpoint outage made few calls or none
  (a row of 0 calls and 3 timed-out attempts), so a preset that lost clips to an outage read as a cheaper one.
  The table's usage is the cost of the preset's outputs (once `--retry-ineligible` fills the rows, the outage
  rows and their usage are gone from it too), so outage rows are left out of it and named."""

from __future__ import annotations

from evals.eval_views import usage_lines
from evals.table import metrics_as_dicts, preset_metrics, render_markdown

OUTAGE = [{"stage": "observe", "kind": "transport", "message": "endpoint down"}]
OWN = [{"stage": "observe", "kind": "invalid_reply", "message": "no JSON in the reply"}]
USED = {"calls": 4, "images": 40, "input_tokens": 1000, "output_tokens": 100, "cache_hits": 0, "attempts": 4}
DOWN = {"calls": 0, "images": 0, "input_tokens": 0, "output_tokens": 0, "cache_hits": 0, "attempts": 3}


def _row(path, label, reward, faults=None, usage=USED, pattern="teleport"):
    judge = {"status": "skipped"} if reward is None else {"status": "judged", "reasonable": True}
    status = "ineligible" if reward is None else "zero" if reward == 0 else "scored"  # as `raa eval reward` writes
    return {"preset": "full", "path": path, "label": label, "pattern": pattern, "reward": reward, "status": status,
            "judge": judge, "faults": faults or [], "usage": usage}


def _rows():
    return [_row("n1", "failure", 0.5), _row("n2", "failure", 0.0), _row("n3", "failure", None, OUTAGE, DOWN),
            _row("n4", "failure", None, OWN)]


def test_mean_reward_by_label_leaves_outage_rows_out_of_its_row_count():
    m = preset_metrics("full", _rows())
    failure = m.by_label["failure"]
    assert (failure.mean, failure.rewarded, failure.total_excluding_outage, failure.outage) == (0.25, 2, 3, 1)  # was 4
    assert m.f_cell == "1 / 3 (1 ineligible; 1 outage not counted)"  # the same 3 rows as the mean's
    md = render_markdown([m])
    assert "| full | 0.250 (2/3; 1 outage not counted) |" in md  # by label and by pattern alike
    assert md.count("0.250 (2/3; 1 outage not counted)") == 2
    assert metrics_as_dicts([m])[0]["by_label"]["failure"]["total_excluding_outage"] == 3  # `total` stays 4
    clean = preset_metrics("full", [r for r in _rows() if r["faults"] != OUTAGE])
    assert "| full | 0.250 (2/3) |" in render_markdown([clean])  # no note without an outage row


def test_report_page_means_leave_outage_rows_out(tmp_path):
    import json

    from evals.report_index import write_eval_index

    out = tmp_path / "ev"
    out.mkdir()
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    html = write_eval_index(out).read_text()
    assert "0.250 (2/3; 1 outage not counted)" in html and "(2/4)" not in html


def test_usage_per_clip_leaves_outage_rows_out_and_says_so():
    m = preset_metrics("full", _rows())
    assert m.usage_per_clip["calls"] == 4.0  # was 12 / 4 = 3.0: the outage run's 0 calls made the preset cheaper
    assert m.usage_per_clip["attempts"] == 4.0  # was 15 / 4
    assert (m.usage_unknown, m.usage_outage, m.usage_rows) == (0, 1, 3)
    assert "| full | 2 (1 outage) | 0 | 2 | 4.0 | 40.0 | 1000 | 100 | 0.0 | 4.0 | 0 |" in render_markdown([m])
    import csv
    import io

    from evals.table import render_csv

    (row,) = csv.DictReader(io.StringIO(render_csv([m])))  # the means' denominator: n - usage_unknown - usage_outage
    assert (row["calls_per_clip"], row["n"], row["usage_unknown"], row["usage_outage"]) == ("4.000", "4", "0", "1")
    (line,) = usage_lines([m])
    assert line.endswith("(1 outage row left out, as from R: its requests were sent, but it is no output of the "
                         "preset; means over the other 3)"), line


def test_a_crashed_row_is_counted_once_as_usage_unknown():
    """A scorer chunk that crashed leaves rows of unknown usage that are outage rows too: counted as unknown, not
    again as outage rows left out."""
    rows = [_row("a", "failure", 0.5), _row("b", "failure", None, [{"stage": "harness", "kind": "internal",
                                                                   "message": "worker died"}], None)]
    m = preset_metrics("full", rows)
    assert (m.usage_unknown, m.usage_outage, m.usage_rows, m.usage_per_clip["calls"]) == (1, 0, 1, 4.0)
    assert usage_lines([m])[0].endswith("(usage unknown for 1 row: not recorded, as when a scorer chunk crashed; "
                                        "means over the other 1)")
