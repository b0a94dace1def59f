"""Rows of results.jsonl that `raa eval report DIR` cannot show as they stand (`evals.report_index`): a run id that
is not a string, a preset the table does not know. Tiny hand-written results, no agent, no network."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evals.report_index import write_eval_index


def _row(name: str, preset: str, run_id: object) -> dict:
    return {"path": f"/clips/{name}.mp4", "instruction": "push the block", "label": "ordinary", "pattern": "push",
            "task": "push", "preset": preset, "reward": 0.5, "status": "scored", "run_id": run_id, "judge": None}


def _index(root: Path, rows: list[dict], reports: tuple[str, ...] = ()) -> str:
    out = root / "eval"
    out.mkdir()
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (out / "reports").mkdir()
    for name in reports:
        (out / "reports" / f"{name}.html").write_text("<html></html>")
    return write_eval_index(out, traces_path=root / "none.sqlite").read_text()


def _header(html: str) -> str:
    return re.search(r'<div class="muted">(.*?)</div>', html).group(1)


@pytest.mark.parametrize("run_id", [12, 1.5, True, ["run-1"], {"id": "run-1"}])
def test_a_run_id_that_is_not_a_string_is_named_not_a_traceback(tmp_path, run_id):
    """A hand-edited row with ``"run_id": 12`` crashed the index in `safe_name` (re.sub on an int), and a list
    as a dict key: the row is shown without a link, and the header says how many rows had such an id."""
    html = _index(tmp_path, [_row("a", "full", run_id), _row("b", "full", "run-2"), _row("c", "full", None)],
                  reports=("run-2",))
    assert html.count('class="run-link"') == 1 and 'href="reports/run-2.html"' in html  # the good row keeps it
    assert "a.mp4" in html and "c.mp4" in html  # every row is still shown
    assert "1 row has a run id that is not a string (not linked)" in _header(html)


def test_a_missing_run_id_is_not_named_as_a_bad_one(tmp_path):
    html = _index(tmp_path, [_row("a", "full", None), _row("b", "full", "")])
    assert "not a string" not in html


def test_rows_of_an_unknown_preset_are_counted_as_left_out_not_as_clips(tmp_path):
    """Rows of a preset the table does not know were dropped from the table but their clips were counted (a
    clip row of empty cells, "3 clips × 1 preset"): the header counts what is shown and says what was left out."""
    html = _index(tmp_path, [_row("a", "full", "r1"), _row("b", "best", "r2"), _row("c", "best", "r3"),
                             _row("a", "zzz", "r4")])
    header = _header(html)
    assert header.startswith("1 clip × 1 preset"), header
    assert "3 rows of unknown presets (best, zzz) left out" in header, header
    assert "b.mp4" not in html and "c.mp4" not in html
    assert html.count("<tr>") - html.count("<tr><th") >= 1


def test_only_rows_of_unknown_presets_leave_an_empty_page_that_says_why(tmp_path):
    html = _index(tmp_path, [_row("a", "best", "r1")])
    header = _header(html)
    assert header.startswith("0 clips × 0 presets"), header
    assert "1 row of an unknown preset (best) left out" in header, header
