"""Readers of a run's logs on files a person or another tool edited (training/best.py, training/report.py):
a line they cannot use is left out, never a crash of the trainer's pruning, a resume or the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.disk_faults import half_then_full_disk
from training.best import best_checkpoint, eval_rows
from training.engine import mark_latest
from training.resume import StateLayout, write_layout


def _checkpoint(ckpt_dir: Path, iteration: int) -> None:
    folder = ckpt_dir / f"iter_{iteration:06d}"
    folder.mkdir(parents=True)
    write_layout(folder, StateLayout(2, "float32"))
    mark_latest(ckpt_dir, iteration)


def test_a_row_whose_iteration_is_infinite_is_left_out(tmp_path):
    """Python's json reads ``Infinity`` and ``1e400`` as inf, and int(inf) raised OverflowError, which the
    reader did not catch: the best checkpoint (pruning, ``--tag best``, the report) crashed on the file."""
    path = tmp_path / "eval.jsonl"
    path.write_text('{"iteration": Infinity, "eval_reward_mean": 0.9}\n{"iteration": 1e400, "eval_reward_mean": 0.9}\n'
                    + json.dumps({"iteration": 2, "eval_reward_mean": 0.5}) + "\n")
    assert [r["iteration"] for r in eval_rows(path)] == [2]
    _checkpoint(tmp_path / "checkpoints", 2)
    assert best_checkpoint(tmp_path / "checkpoints", path) == ("iter_000002", 2, 0.5)


def test_a_row_whose_iteration_is_not_a_whole_number_is_left_out(tmp_path):
    """``"3"`` read as iteration 3, 2.7 as 2 and ``true`` as 1: a hand-edited row could make `best_checkpoint`
    pick a checkpoint its mean was never measured on. The trainer writes ints, and the report kept only ints
    (but ``true`` as 1): both readers now keep JSON integers alone."""
    path = tmp_path / "eval.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in (
        {"iteration": "3", "eval_reward_mean": 0.9}, {"iteration": 2.7, "eval_reward_mean": 0.9},
        {"iteration": True, "eval_reward_mean": 0.9}, {"iteration": 4.0, "eval_reward_mean": 0.4},
        {"iteration": 2, "eval_reward_mean": 0.5})))
    assert [r["iteration"] for r in eval_rows(path)] == [2]
    for it in (1, 2, 3):
        _checkpoint(tmp_path / "checkpoints", it)
    assert best_checkpoint(tmp_path / "checkpoints", path) == ("iter_000002", 2, 0.5)
    from training.best import passed_over

    assert passed_over(tmp_path / "checkpoints", path, ("iter_000002", 2, 0.5)) == [
        "4 rows of eval.jsonl without an integer iteration"]
    from training.run_files import read_run

    assert [r["iteration"] for r in read_run(tmp_path).evals] == [2]


def test_a_report_that_cannot_be_written_whole_leaves_the_previous_page(tmp_path, monkeypatch):
    """report.html (and a comparison page) were written in place: a full disk left a cut page where the
    previous one was."""
    from training.compare_runs import write_comparison
    from training.report import write_training_report

    runs = []
    for name in ("a", "b"):
        run = tmp_path / name
        run.mkdir()
        (run / "metrics.jsonl").write_text(json.dumps({"iteration": 1, "reward_mean": 0.5}) + "\n")
        runs.append(run)
    page = write_training_report(runs[0])
    both = write_comparison(runs, tmp_path / "both.html")
    before = page.read_text(), both.read_text()
    monkeypatch.setattr(Path, "write_text", half_then_full_disk)
    with pytest.raises(OSError):
        write_training_report(runs[0])
    with pytest.raises(OSError):
        write_comparison(runs, both)
    monkeypatch.undo()
    assert (page.read_text(), both.read_text()) == before
    assert sorted(p.name for p in runs[0].iterdir()) == ["metrics.jsonl", "report.html"]  # no temporary file left


def test_rollout_rows_whose_rank_or_sample_is_null_are_named_not_a_crash_of_the_report(tmp_path):
    """rewards.jsonl rows with ``"rank": null``, ``"sample": null`` or a list for a group (a hand-edited file)
    crashed the whole page (int(None), sorting None, an unhashable key); they are left out and named in the
    header, and the other rollouts still show."""
    from training.report import read_run, render_training_report

    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text(json.dumps({"iteration": 1, "reward_mean": 0.5}) + "\n")
    base = {"iteration": 1, "rank": 0, "group": 0, "prompt": "push", "advantage": 0.0}
    rows = [{**base, "sample": 0, "reward": 0.25, "video": "rollout_videos/a.mp4"},
            {**base, "sample": 1, "reward": 0.75, "video": "rollout_videos/b.mp4"},
            {**base, "rank": None, "sample": 2, "reward": 0.1, "video": "rollout_videos/c.mp4"},
            {**base, "sample": None, "reward": 0.1, "video": "rollout_videos/d.mp4"},
            {**base, "group": [1], "sample": 3, "reward": 0.1, "video": "rollout_videos/e.mp4"}]
    (run / "rewards.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    files = read_run(run)
    assert [r["sample"] for r in files.rollouts] == [0, 1]
    assert files.left_out == ["iteration 1 rank None group 0 sample 2", "iteration 1 rank 0 group 0 sample None",
                              "iteration 1 rank 0 group [1] sample 3"]
    html = render_training_report(run)
    assert "rewards.jsonl rows left out" in html and "iteration 1 rank None group 0 sample 2" in html
    rollouts = html.split('id="rollouts-table"')[1].split("</table>")[0]
    assert "0.250" in rollouts and "0.750" in rollouts and "0.100" not in rollouts
