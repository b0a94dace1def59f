"""Files given to the wrong `raa eval` command are named as what they are: `raa eval report` given the
results.jsonl inside its folder said "no evaluation results in DIR/results.jsonl (expected
DIR/results.jsonl/results.jsonl)"; `raa eval compare` / `draws` given `raa eval reward`'s results.jsonl said each
line was "not a score-batch row" without saying whose rows they were; given a folder, "results file not found"."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from graph.cli import app

runner = CliRunner()
EVAL_ROW = {"path": "/clips/a.mp4", "instruction": "push the block", "label": "ordinary", "preset": "full",
            "reward": 0.5, "status": "scored", "judge": None}


def _report_given_its_results_file(out):
    """`raa eval report OUT/results.jsonl` (the file, not its folder) on a folder holding one eval row."""
    out.mkdir()
    (out / "results.jsonl").write_text(json.dumps(EVAL_ROW) + "\n")
    res = runner.invoke(app, ["eval", "report", str(out / "results.jsonl")])
    assert res.exit_code == 2
    return res


def test_eval_report_given_the_results_file_names_its_folder(tmp_path):
    out = tmp_path / "eval"
    res = _report_given_its_results_file(out)
    assert f"{out / 'results.jsonl'} is a file: `raa eval report` takes the folder `raa eval reward --out` " \
           f"wrote (raa eval report {out})" in " ".join(res.output.split()), res.output


@pytest.mark.parametrize("command", [["eval", "draws"], ["eval", "compare"]])
def test_compare_and_draws_name_eval_reward_rows_and_folders(tmp_path, command):
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps(EVAL_ROW) + "\n")
    files = [str(results)] * (2 if command[1] == "compare" else 1)
    res = runner.invoke(app, [*command, *files])
    assert res.exit_code == 2 and "a row of `raa eval reward` (its results.jsonl)" in res.output, res.output
    assert "reads `raa score-batch` outputs" in " ".join(res.output.split()), res.output
    folder = [str(tmp_path)] * len(files)
    res = runner.invoke(app, [*command, *folder])
    assert res.exit_code == 2 and f"{tmp_path} is a folder, not a results file" in res.output, res.output


def test_the_suggested_report_command_quotes_a_folder_with_a_space(tmp_path):
    """The hint said "(raa eval report /tmp/my evals)": pasted, `raa eval report` got two folders."""
    import shlex

    out = tmp_path / "my evals"
    res = _report_given_its_results_file(out)
    assert f"(raa eval report {shlex.quote(str(out))})" in res.output.replace("\n", ""), res.output
