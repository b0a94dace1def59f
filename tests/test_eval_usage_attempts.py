"""The eval tables show `attempts` per clip (requests sent, a reply or not: `graph.usage.Usage.attempts`) beside the
other usage figures, as the batch totals and training logs do: a preset whose calls time out or hit 429s costs
more requests than its calls say. Rows recorded before `attempts` existed leave it out of that figure's mean (they
did not record it; counted as 0 they read as fewer requests than replies)."""

from __future__ import annotations

import csv
import io

import pytest

from evals.eval_views import usage_lines
from evals.report_index import _table_html
from evals.table import preset_metrics, render_csv, render_markdown


def _row(usage: dict | None) -> dict:
    return {"path": "/clips/a.mp4", "preset": "full", "reward": 0.5, "status": "scored", "label": "progress",
            "judge": {"status": "judged", "reasonable": True}, "usage": usage}


def test_attempts_per_clip_appear_in_every_table() -> None:
    m = preset_metrics("full", [_row({"calls": 2, "attempts": 5}), _row({"calls": 2, "attempts": 3})])
    assert m.usage_per_clip["attempts"] == pytest.approx(4.0)
    md = render_markdown([m])
    assert "Attempts / clip" in md and "| 4.0 |" in md
    (row,) = csv.DictReader(io.StringIO(render_csv([m])))
    assert row["attempts_per_clip"] == "4.000"
    assert "attempts/clip 4.0" in usage_lines([m])[0]
    assert "attempts/clip" in _table_html([m])


def test_rows_recorded_before_attempts_leave_it_out_of_its_mean() -> None:
    old = preset_metrics("full", [_row({"calls": 3, "images": 1})])
    assert old.usage_per_clip["calls"] == 3.0 and old.usage_per_clip["attempts"] is None
    assert old.usage_cell("attempts", 1) == "-" and old.usage_per_clip["cache_hits"] == 0.0
    mixed = preset_metrics("full", [_row({"calls": 3}), _row({"calls": 1, "attempts": 2})])
    assert mixed.usage_per_clip["attempts"] == 2.0 and mixed.usage_per_clip["calls"] == 2.0
