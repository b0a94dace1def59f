"""`raa eval report` pages (`evals.report_index`) written whole or not at all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.disk_faults import half_then_full_disk


def test_a_run_report_cut_by_a_crash_is_written_again(tmp_path, monkeypatch):
    """Existing run reports are kept on a rerun; one cut by a full disk was kept cut for good."""
    import evals.report
    import graph.tracing
    from evals.report_index import write_eval_index

    class Saver:
        class conn:  # noqa: N801 - stands in for the sqlite connection
            @staticmethod
            def close() -> None:
                pass

    full = "<!DOCTYPE html><html><body>" + "x" * 1000 + "</body></html>\n"
    monkeypatch.setattr(graph.tracing, "open_saver", lambda path, read_only=False: Saver())
    monkeypatch.setattr(graph.tracing, "read_trace", lambda saver, run_id, claim_max_age_s: run_id)
    monkeypatch.setattr(evals.report, "render_run_report", lambda trace, tracker=None: full)
    out = tmp_path / "eval"
    out.mkdir()
    row = {"path": str(tmp_path / "a.mp4"), "preset": "full", "instruction": "push <b>it</b>", "label": "ordinary",
           "pattern": "success", "reward": 0.5, "status": "scored", "run_id": "run-1", "judge": None}
    (out / "results.jsonl").write_text(json.dumps(row) + "\n")
    traces = tmp_path / "traces.sqlite"
    traces.write_bytes(b"")
    with monkeypatch.context() as m:
        m.setattr(Path, "write_text", half_then_full_disk)
        with pytest.raises(OSError):
            write_eval_index(out, traces_path=traces)
    index = write_eval_index(out, traces_path=traces)
    assert (out / "reports" / "run-1.html").read_text() == full
    assert "push &lt;b&gt;it&lt;/b&gt;" in index.read_text()
    assert sorted(p.name for p in (out / "reports").iterdir()) == ["run-1.html"]


def test_a_positive_reward_never_reads_as_zero_on_the_index(tmp_path):
    """The index showed rewards with 3 decimals: a scored reward of 0.0004 read "0.000" beside its "scored"
    badge (and in the mean by label), though F+ counts it as positive. It is shown as the judge sees it."""
    from evals.report_index import write_eval_index

    out = tmp_path / "eval"
    out.mkdir()
    rows = [{"path": str(tmp_path / f"{n}.mp4"), "preset": "direct", "instruction": "push it", "label": label,
             "pattern": "success", "reward": reward, "status": status, "run_id": "", "judge": None}
            for n, label, reward, status in (("a", "failure", 0.0004, "scored"), ("b", "ordinary", 0.0, "zero"),
                                             ("c", "ordinary", 0.5, "scored"))]
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    html = write_eval_index(out).read_text()
    assert '<td>4.00e-04 <span class="badge scored">' in html  # the clip's cell
    assert "<td>4.00e-04 (1/1)</td>" in html  # the mean over failure clips
    assert '<td>0.000 <span class="badge zero">' in html and '<td>0.500 <span class="badge scored">' in html


def test_a_positive_reward_never_reads_as_zero_in_a_run_report():
    """The run report's headline reward had the same 3 decimals as the index that links to it."""
    from evals.report import render_run_report
    from graph.tracing import RunTrace

    trace = RunTrace("run-1", "2026-01-01T00:00:00", {"result": {"reward": 0.0004, "status": "scored"}})
    assert "<div class=\"reward\">4.00e-04</div>" in render_run_report(trace)


NOT_BOOLEAN = "not true/false"  # as the R cell names such verdicts (tests/test_eval_verdict_not_boolean.py)


@pytest.mark.parametrize(("reasonable", "shown"), [(True, "✓"), (False, "✗"), (1, NOT_BOOLEAN), ([True], NOT_BOOLEAN),
                                                   ({"x": 1}, NOT_BOOLEAN), (None, NOT_BOOLEAN)])
def test_a_judge_verdict_that_is_no_boolean_is_named_not_ticked(reasonable, shown):
    """A hand-edited results.jsonl row with ``"reasonable": [true]`` crashed the index (a list as a dict key:
    TypeError), and ``1`` showed as a ✓ (1 == True): only a JSON boolean is a verdict, as the table counts it.
    The cell read "unjudged", which the table did not count it as; it names the cause as the R cell does."""
    from evals.report_index import _cell

    cell = _cell({"reward": 0.5, "status": "rewarded", "judge": {"status": "judged", "reasonable": reasonable}}, None)
    assert shown in cell and ({"✓", "✗"} - {shown}).isdisjoint(cell)


def test_the_scope_carries_the_summary_it_was_read_from(tmp_path):
    """summary.json was read twice, once for the scope and again for the run's manifest (the rerun command): a run
    finishing in between gave the page one run's clips and another's command. The scope now carries the summary."""
    from evals.report_index import read_summary, scope_of

    summary = tmp_path / "summary.json"
    written = {"manifest": "m.jsonl", "presets": ["full"], "paths": ["a.mp4"], "clips": 1}
    summary.write_text(json.dumps(written))
    scope = scope_of(read_summary(summary), summary)
    assert scope is not None and scope.paths == {"a.mp4"} and scope.presets == {"full"} and scope.summary == written
