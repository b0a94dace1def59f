"""Second review pass over evals/: error paths and statistics found wrong (one test per bug)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import evals.eval_cli as eval_cli

runner = CliRunner()


def _eval_dir(tmp_path):
    ev = tmp_path / "ev"
    ev.mkdir()
    row = {"path": str(tmp_path / "a.mp4"), "preset": "full", "label": "failure", "reward": 0.9, "status": "scored",
           "run_id": "r1"}
    (ev / "results.jsonl").write_text(json.dumps(row) + "\n")
    return ev


def test_eval_report_names_a_trace_file_that_is_not_a_database(tmp_path):
    """`raa eval report DIR --traces FILE` with FILE not an SQLite database ended in a StoreError traceback
    (exit 1); `raa report RUN` reports the same error as one line, exit 2."""
    ev = _eval_dir(tmp_path)
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not a database " * 100)
    result = runner.invoke(eval_cli.eval_app, ["report", str(ev), "--traces", str(bad)])
    assert result.exit_code == 2, (result.output, result.exception)
    assert isinstance(result.exception, SystemExit)
    assert result.output.startswith("error: ") and "bad.sqlite" in result.output
    assert not (ev / "index.html").exists()


def test_eval_report_names_a_results_file_that_is_not_utf8(tmp_path):
    """A results.jsonl that is not UTF-8 (a Latin-1 export) ended `raa eval report` in a UnicodeDecodeError
    traceback naming no file."""
    ev = _eval_dir(tmp_path)
    (ev / "results.jsonl").write_bytes(b'{"path": "caf\xe9.mp4", "preset": "full"}\n')
    result = runner.invoke(eval_cli.eval_app, ["report", str(ev), "--traces", str(tmp_path / "none.sqlite")])
    assert result.exit_code == 2, (result.output, result.exception)
    assert isinstance(result.exception, SystemExit)
    assert "results.jsonl" in result.output and "UTF-8" in result.output


def test_reward_eval_refuses_a_results_file_that_is_not_utf8_without_rewriting_it(tmp_path):
    """run_reward_eval on a DIR whose results.jsonl is not UTF-8 crashed with a bare UnicodeDecodeError; it
    must raise a ManifestError naming the file and leave the file as it is (the compaction would drop it)."""
    import asyncio

    from evals.reliability import ManifestError, run_reward_eval
    from evals.reward_scorer import EvalClip

    ev = tmp_path / "ev"
    ev.mkdir()
    data = b'{"path": "caf\xe9.mp4", "preset": "full"}\n'
    (ev / "results.jsonl").write_bytes(data)
    clip = EvalClip(str(tmp_path / "a.mp4"), "push", "failure", "-", "")
    with pytest.raises(ManifestError, match="results.jsonl.*UTF-8"):
        asyncio.run(run_reward_eval([clip], ["full"], ev, scorer=None, judge=None))  # type: ignore[arg-type]
    assert (ev / "results.jsonl").read_bytes() == data


def _score_rows(path, rewards):
    """A score-batch output with rows in the given order (key -> reward), as `graph.batch` writes them."""
    from graph.batch import read_manifest, result_line
    from graph.schemas import RewardResult

    manifest = path.with_suffix(".manifest.jsonl")
    manifest.write_text("".join(json.dumps({"path": f"v/{k}.mp4", "instruction": "stack", "key": k}) + "\n"
                                for k in rewards))
    lines = [result_line(item, RewardResult(reward=r, status="zero" if r == 0 else "scored", preset="full"))
             for item, r in zip(read_manifest(manifest, "full"), rewards.values(), strict=True)]
    path.write_text("".join(line.rstrip("\n") + "\n" for line in lines))
    return path


def test_compare_interval_does_not_depend_on_row_order(tmp_path):
    """The bootstrap resampled the paired differences in the order of A's rows, so the same two sets of videos
    written in another order (score-batch writes rows as runs finish) gave another 95% interval."""
    from evals.compare import compare

    rng = np.random.default_rng(7)
    keys = [f"k{i}" for i in range(12)]
    ra, rb = dict(zip(keys, rng.uniform(0, 1, 12).round(3), strict=True)), dict(zip(keys, rng.uniform(0, 1, 12).round(3),
                                                                                     strict=True))
    b = _score_rows(tmp_path / "b.jsonl", rb)
    first = compare(_score_rows(tmp_path / "a1.jsonl", ra), b)
    reordered = compare(_score_rows(tmp_path / "a2.jsonl", {k: ra[k] for k in reversed(keys)}), b)
    assert first.n == reordered.n == 12 and first.mean_diff == pytest.approx(reordered.mean_diff)
    assert first.ci95 == reordered.ci95


def _cells(line: str) -> list[str]:
    """A Markdown table row's cells (a pipe escaped as \\| stays inside its cell)."""
    import re

    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def test_markdown_table_keeps_its_columns_with_a_pipe_or_newline_in_a_pattern_name(tmp_path):
    """A manifest pattern (free text) holding "|" added a column to the mean-reward-by-pattern header of
    table.md, so every value below it sat under the wrong pattern; a newline cut the header in two."""
    from evals.table import all_metrics, render_markdown

    rows = [{"path": "a.mp4", "preset": "full", "label": "failure", "pattern": "push|pull", "reward": 0.25,
             "status": "scored"},
            {"path": "b.mp4", "preset": "full", "label": "failure", "pattern": "slide\nfast", "reward": 0.75,
             "status": "scored"},
            {"path": "c.mp4", "preset": "full", "label": "progress", "pattern": "zz", "reward": 0.5,
             "status": "scored"}]
    text = render_markdown(all_metrics(rows, ["full"]))
    block = text.split("Mean reward by pattern")[1].strip().splitlines()[2:]
    header, rule, values = block[0], block[1], block[2]
    assert len(_cells(header)) == len(_cells(rule)) == len(_cells(values)) == 4
    assert dict(zip(_cells(header), _cells(values), strict=True))["zz"] == "0.500 (1/1)"


def _draw_rows(path, clips):
    """A score-batch output holding draws 0 and 1 of each clip (name -> two rewards), clips in the given order."""
    from graph.batch import read_manifest, result_line
    from graph.schemas import RewardResult

    manifest = path.with_suffix(".manifest.jsonl")
    manifest.write_text("".join(json.dumps({"path": f"{k}.mp4", "instruction": "stack"}) + "\n" for k in clips))
    lines = [result_line(item, RewardResult(reward=rewards[draw], status="scored", preset="full"))
             for draw in range(2)
             for item, rewards in zip(read_manifest(manifest, "full", draw), clips.values(), strict=True)]
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_draws_most_variable_clips_do_not_depend_on_row_order(tmp_path):
    """Clips of equal range were listed (and cut to the top 10) in the order the file happened to hold them,
    so the same draws written in another order named other clips in most_variable."""
    from evals.draws import summarize_draws

    clips = {f"c{i:02d}": [0.25, 0.75] for i in range(12)}  # twelve clips of one range: the cut falls in a tie
    forward = summarize_draws(_draw_rows(tmp_path / "f.jsonl", clips))
    backward = summarize_draws(_draw_rows(tmp_path / "b.jsonl", dict(reversed(clips.items()))))
    names = [[Path(c["path"]).name for c in s.most_variable] for s in (forward, backward)]
    assert names[0] == names[1] == [f"c{i:02d}.mp4" for i in range(10)]


def test_eval_report_says_how_many_results_lines_it_skipped(tmp_path):
    """A line of results.jsonl that is not a result row (a hand edit, a BOM, another tool's line) was dropped
    from the index page without a word, so its clip and preset silently left N."""
    from evals.report_index import write_eval_index

    ev = _eval_dir(tmp_path)
    good = (ev / "results.jsonl").read_text()
    (ev / "results.jsonl").write_text('{"path": "b.mp4", "preset": "full", "reward": 0.5,\n' + good + "[1, 2]\n")
    page = write_eval_index(ev).read_text()
    assert "2 lines of results.jsonl are not result rows" in page
    assert "a.mp4" in page


def test_eval_report_of_the_current_folder_names_it(tmp_path, monkeypatch):
    """`raa eval report .` (run inside the evaluation folder) titled the page "Evaluation " and its header
    "Reward reliability: ": Path(".").name is empty."""
    from evals.report_index import write_eval_index

    ev = _eval_dir(tmp_path)
    monkeypatch.chdir(ev)
    page = write_eval_index(Path(".")).read_text()
    assert "<title>Evaluation ev</title>" in page and "Reward reliability: ev</h1>" in page


def test_reward_eval_names_a_results_path_that_is_a_folder(tmp_path):
    """DIR/results.jsonl a folder: `raa eval reward` ended in an IsADirectoryError traceback (it opens the file
    to append); now a ManifestError naming it, which the CLI prints as one line."""
    import asyncio

    from evals.reliability import ManifestError, run_reward_eval
    from evals.reward_scorer import EvalClip

    ev = tmp_path / "ev"
    (ev / "results.jsonl").mkdir(parents=True)
    clip = EvalClip(str(tmp_path / "a.mp4"), "push", "failure", "-", "")
    with pytest.raises(ManifestError, match="results.jsonl is not a file"):
        asyncio.run(run_reward_eval([clip], ["full"], ev, scorer=None, judge=None))  # type: ignore[arg-type]
