"""Reliability table (`evals.table`): rows the metrics cannot count are named, not crashed on."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("field,value", [
    ("reward", "0.9"), ("reward", True), ("reward", float("nan")), ("judge", "judged"), ("usage", [1, 2]),
    ("usage", {"calls": "four"}),
])
def test_metrics_name_the_row_and_field_they_cannot_count(field, value):
    """Hand-edited rows crashed the table with a bare TypeError / AttributeError / ValueError."""
    from evals.table import preset_metrics
    from evals.table_rows import TableRowError

    good = {"path": "/c/a.mp4", "preset": "full", "label": "failure", "reward": 0.5, "status": "scored",
            "judge": {"status": "judged", "reasonable": False}, "usage": {"calls": 2}}
    assert preset_metrics("full", [good]).f_plus == 1
    with pytest.raises(TableRowError, match=rf"full row 1 \('/c/b.mp4'\): field '{field}'"):
        preset_metrics("full", [good, {**good, "path": "/c/b.mp4", field: value}])
