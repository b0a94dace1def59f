"""`raa eval report DIR` index links and verdict cells, from tiny hand-written results (no agent, no network)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from evals.report import safe_name
from evals.report_index import write_eval_index


def _row(path: str, preset: str, run_id: str, judge: dict | None) -> dict:
    return {"path": path, "instruction": "push the block", "label": "ordinary", "pattern": "push", "task": "push",
            "preset": preset, "reward": 0.5, "status": "scored", "run_id": run_id, "judge": judge,
            "usage": {"calls": 1, "images": 2, "input_tokens": 3, "output_tokens": 4, "cache_hits": 0}}


def _eval_dir(root: Path, rows: list[dict]) -> Path:
    out = root / "eval"
    out.mkdir()
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def _links(html: str) -> list[str]:
    return re.findall(r'class="run-link" href="(reports/[^"]+)"', html)


def test_index_without_a_trace_database_links_reports_already_on_disk(tmp_path):
    """A copied eval folder rebuilt on a machine without the trace database lost every link: reports already
    in DIR/reports were linked only when a database was found, though with one they are linked even for runs
    the database lacks."""
    judged = {"status": "judged", "reasonable": True}
    out = _eval_dir(tmp_path, [_row("/clips/a.mp4", "full", "run-a", judged),
                               _row("/clips/a.mp4", "direct", "run/b c", judged)])
    (out / "reports").mkdir()
    (out / "reports" / f"{safe_name('run-a')}.html").write_text("<html>run-a</html>")
    for traces in (None, tmp_path / "absent.sqlite"):
        html = write_eval_index(out, traces_path=traces).read_text()
        assert _links(html) == [f"reports/{safe_name('run-a')}.html"], traces
        assert "1 run report linked" in html and "1 run without a report" in html
    (out / "reports" / f"{safe_name('run/b c')}.html").write_text("<html>b</html>")
    html = write_eval_index(out, traces_path=None).read_text()
    assert len(_links(html)) == 2 and "without a report" not in html


def test_index_without_reports_or_database_says_so(tmp_path):
    out = _eval_dir(tmp_path, [_row("/clips/a.mp4", "full", "run-a", None)])
    html = write_eval_index(out, traces_path=None).read_text()
    assert "run-link" not in html and "no trace database given or found" in html
    assert not (out / "reports").exists()  # nothing to write: no empty folder left behind


def test_verdict_cell_ticks_only_judged_verdicts(tmp_path):
    """The cell showed ✓ / ✗ for any verdict carrying `reasonable`, while the table counts only `judged`
    ones: an `unjudged` verdict with reasonable true read as accepted beside an R that did not count it."""
    out = _eval_dir(tmp_path, [_row("/clips/a.mp4", "full", "r1", {"status": "judged", "reasonable": True}),
                               _row("/clips/b.mp4", "full", "r2", {"status": "unjudged", "reasonable": True}),
                               _row("/clips/c.mp4", "full", "r3", {"status": "skipped", "reasonable": False}),
                               _row("/clips/d.mp4", "full", "r4", {"reasonable": True}),
                               _row("/clips/e.mp4", "full", "r5", {"status": "judged", "reasonable": False})])
    html = write_eval_index(out, traces_path=None).read_text()
    cells = html.split('id="clip-table"', 1)[1]
    assert cells.count('class="yes">✓') == 1 and cells.count('class="no">✗') == 1
    assert cells.count(">unjudged<") == 2 and cells.count(">skipped<") == 1  # a verdict without status: unjudged
    assert "1 / 5 (20.0%; 2 unjudged)" in html  # the table agrees with the cells


def test_the_link_note_counts_in_good_grammar():
    """The index header read "1 run reports linked" and "1 runs not found in the trace database"."""
    from evals.report_links import RunLinks

    one = {"run-a": "reports/run-a.html"}
    assert RunLinks(database=True, links=one, missing=1).note() == \
        "1 run report linked; 1 run not found in the trace database"
    assert RunLinks(database=True, links={**one, "run-b": "reports/run-b.html"}, missing=2).note() == \
        "2 run reports linked; 2 runs not found in the trace database"
    assert RunLinks(database=False, links=one, unreported=1).note() == \
        "no trace database given or found: 1 run report linked from reports/; 1 run without a report"


def test_the_index_header_counts_in_good_grammar(tmp_path):
    """One clip under one preset read "1 clips × 1 presets"; one skipped line "1 line ... is not result rows"."""
    out = _eval_dir(tmp_path, [_row("/clips/a.mp4", "full", "run-a", None)])
    with (out / "results.jsonl").open("a") as fh:
        fh.write("not json\n")
    html = write_eval_index(out, traces_path=None).read_text()
    assert "1 clip × 1 preset ·" in html and "1 line of results.jsonl is not a result row (skipped)" in html
