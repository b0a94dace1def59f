"""summary.json is read by scripts outside the project, so a field keeps its meaning: a figure that leaves the
outage rows out gets a field of its own instead of redefining an old one. The mean reward's `total` (by label, by
pattern) was every row of the group until the means left the outage rows out, when it silently became "rows less
the outage ones" (a reader summing it over the labels no longer got N); it is every row again, the count the
tables show is `total_excluding_outage`, and the file says which layout it has (`schema_version`)."""

from __future__ import annotations

import asyncio
import json

from evals.reliability import run_reward_eval
from evals.table import SUMMARY_SCHEMA_VERSION, metrics_as_dicts, preset_metrics, render_markdown
from tests.test_eval_outages import FaultScorer
from tests.test_eval_reliability import _clips, _judge
from tests.test_eval_table_outage_means import _rows


def test_total_is_every_row_of_the_group_and_the_outage_figures_are_named():
    m = preset_metrics("full", _rows())  # failure: 2 rewarded, 1 of the preset's own ineligible, 1 outage
    (entry,) = [v for k, v in metrics_as_dicts([m])[0]["by_label"].items() if k == "failure"]
    assert entry == {"mean": 0.25, "rewarded": 2, "total": 4, "outage": 1, "total_excluding_outage": 3}
    assert m.n == sum(g["total"] for g in metrics_as_dicts([m])[0]["by_label"].values())  # sums to N again
    assert "| full | 0.250 (2/3; 1 outage not counted) |" in render_markdown([m])  # the tables show the 3


def test_summary_json_names_its_schema_version_and_keeps_totals(tmp_path):
    asyncio.run(run_reward_eval(_clips(tmp_path), ["full"], tmp_path / "ev", FaultScorer(), _judge(), concurrency=1))
    summary = json.loads((tmp_path / "ev" / "summary.json").read_text())
    assert summary["schema_version"] == SUMMARY_SCHEMA_VERSION == 2
    (full,) = summary["metrics"]
    assert full["outage"] == 1
    groups = full["by_label"].values()
    assert sum(g["total"] for g in groups) == full["n"]  # every row, the outage one included
    assert sum(g["total_excluding_outage"] for g in groups) == full["n_r"] == full["n"] - 1
    assert all(g["total"] - g["outage"] == g["total_excluding_outage"] for g in groups)
