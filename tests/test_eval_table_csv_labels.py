"""table.csv's `method` column keeps the paper's labels, "+ ..." included (`evals.table`): the values pandas and
csv readers get stay as they were, and the README says how a spreadsheet should open the file."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from evals.table import DISPLAY_NAMES, PAPER_ORDER, all_metrics, render_csv

README = Path(__file__).resolve().parents[1] / "README.md"
FORMULA_START = ("=", "+", "-", "@")


def _rows() -> list[dict]:
    return [{"path": f"/c/{p}.mp4", "instruction": "push", "label": "failure", "pattern": "=1+1", "task": "",
             "preset": p, "reward": 0.0, "status": "zero", "judge": None, "usage": {"calls": 1}}
            for p in PAPER_ORDER]


def test_method_labels_are_kept_for_csv_readers():
    text = render_csv(all_metrics(_rows(), list(PAPER_ORDER)))
    read = list(csv.DictReader(io.StringIO(text)))
    assert [(r["preset"], r["method"]) for r in read] == list(DISPLAY_NAMES.items())
    assert read[1]["method"] == "+ Structured report and score mapping"  # not "'+ ..." nor " + ..."


def test_only_the_fixed_method_labels_start_like_a_formula():
    """No cell a manifest or a row fills starts like a formula (a pattern "=1+1" is in a `pattern_` header):
    the "+" labels are the only such cells, fixed text, so the file cannot carry an injected formula."""
    cells = [(name, value) for row in csv.DictReader(io.StringIO(render_csv(all_metrics(_rows(), list(PAPER_ORDER)))))
             for name, value in row.items()]
    header = render_csv(all_metrics(_rows(), list(PAPER_ORDER))).splitlines()[0].split(",")
    assert not [h for h in header if h.startswith(FORMULA_START)]
    assert {name for name, value in cells if value.startswith(FORMULA_START)} == {"method"}


def test_the_readme_says_how_to_open_table_csv_in_a_spreadsheet():
    text = " ".join(README.read_text().split())
    assert "spreadsheet" in text and "`method` labels of the cumulative block start with \"+\"" in text
