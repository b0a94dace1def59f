"""`raa eval compare` and `raa eval report` on results files without rows say so, as `raa eval draws` does: they
printed an all-zero table (compare) or wrote an empty page and only "wrote index.html" (report)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

import evals.eval_cli as eval_cli
from graph.cli import app
from tests.test_eval_compare import _scores, twin

runner = CliRunner()


def test_compare_names_the_empty_file(tmp_path):
    a = _scores(tmp_path, "trained", {"k1": 0.9, "k2": 0.7})
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    res = runner.invoke(app, ["eval", "compare", str(a), str(empty), "--json", str(tmp_path / "c.json")])
    assert res.exit_code == 0, res.output
    assert res.output.startswith(f"no rows in {empty}: nothing to compare"), res.output
    assert "Rewards per side" not in res.output and "pairs by" not in res.output  # no table of zeros
    assert json.loads((tmp_path / "c.json").read_text())["b"]["rows"] == 0
    res = runner.invoke(app, ["eval", "compare", str(empty), str(empty)])
    assert res.exit_code == 0 and res.output.count(f"no rows in {empty}") == 2, res.output
    res = runner.invoke(app, ["eval", "compare", str(a), str(twin(a))])  # rows on both sides: the table as before
    assert res.exit_code == 0 and "no rows" not in res.output and "Rewards per side" in res.output


def test_report_names_the_empty_results_file(tmp_path):
    ev = tmp_path / "ev"
    ev.mkdir()
    (ev / "results.jsonl").write_text("")
    res = runner.invoke(eval_cli.eval_app, ["report", str(ev), "--traces", str(tmp_path / "none.sqlite")])
    assert res.exit_code == 0, res.output
    assert res.output.startswith(f"no rows in {ev / 'results.jsonl'}: nothing to report"), res.output
    assert "no rows in results.jsonl" in (ev / "index.html").read_text()  # the page says it too


def test_report_names_a_summary_that_scopes_out_every_row(tmp_path):
    ev = tmp_path / "ev"
    ev.mkdir()
    row = {"path": str(tmp_path / "a.mp4"), "preset": "full", "label": "failure", "reward": 0.0, "status": "zero"}
    (ev / "results.jsonl").write_text(json.dumps(row) + "\n")
    (ev / "summary.json").write_text(json.dumps({"presets": ["full"], "paths": [str(tmp_path / "b.mp4")]}))
    res = runner.invoke(eval_cli.eval_app, ["report", str(ev), "--traces", str(tmp_path / "none.sqlite")])
    assert res.exit_code == 0, res.output
    assert f"no rows in {ev / 'results.jsonl'} of the clips and presets {ev / 'summary.json'} names" in res.output
    (ev / "summary.json").unlink()
    res = runner.invoke(eval_cli.eval_app, ["report", str(ev), "--traces", str(tmp_path / "none.sqlite")])
    assert res.exit_code == 0 and "no rows" not in res.output, res.output
