"""A preset without rows (`all_metrics` over rows none of which is the preset's; `run_reward_eval` with no clips)
read "0 / 0 (0.0%)" in table.md and r_pct 0.00 in table.csv and summary.json: an R of 0% is a judge that rejected
every output, and there was none. It has no R, as a preset an outage took every row of: "no rows" in table.md,
empty in table.csv, null in summary.json."""

from __future__ import annotations

import csv
import io

from evals.table import all_metrics, metrics_as_dicts, render_csv, render_markdown


def test_a_preset_without_rows_has_no_r():
    metrics = all_metrics([{"preset": "direct", "path": "/c.mp4", "reward": 0.5, "label": "progress"}],
                          ["direct", "full"])
    full = metrics[1]
    assert (full.n, full.r_unknown, full.r_cell) == (0, True, "no rows")
    assert "| Full Reward Agent | no rows | 0 / 0 | 0 / 0 |" in render_markdown(metrics)
    line = list(csv.DictReader(io.StringIO(render_csv(metrics))))[1]
    assert (line["preset"], line["r"], line["r_pct"]) == ("full", "", "")
    summary = metrics_as_dicts(metrics)[1]
    assert (summary["r"], summary["r_pct"], summary["r_cell"]) == (None, None, "no rows")
