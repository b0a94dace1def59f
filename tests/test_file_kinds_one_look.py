"""A path that should name a file (a manifest, a results file) is looked at once (`tools.file_kinds.kind_at`; a
results file is read in that look, `evals.batch_rows.read_results_file`): it was
looked at twice, `Path.is_file` and then `kind_at`'s own stat, two checks of one thing that may each see another file
(a FIFO taken away in between read "not found"). Their answers are unchanged."""

from __future__ import annotations

import os

import pytest

from evals.batch_rows import read_results_file
from tests.path_calls import calls_on
from tools.file_kinds import missing_file

CHECKS = [(lambda path: missing_file(path, "manifest"), {
              "file": None,
              "fifo": "manifest {path} is a FIFO, not a regular file: write the manifest to a file and give its path",
              "folder": "manifest {path} is a folder, not a regular file: write the manifest to a file and give its "
                        "path",
              "none": "manifest not found: {path}",
              "dangling": "manifest not found: {path}"}),
          (lambda path: read_results_file(path)[0], {
              "file": None,
              "fifo": "{path} is a FIFO, not a results file (give the file `raa score-batch --out` wrote)",
              "folder": "{path} is a folder, not a results file (give the file `raa score-batch --out` wrote)",
              "none": "results file not found: {path}",
              "dangling": "results file not found: {path}"})]


def _make(tmp_path, what):
    path = tmp_path / f"{what}.jsonl"
    if what == "file":
        path.write_text("{}\n")
    elif what == "fifo":
        os.mkfifo(path)
    elif what == "folder":
        path.mkdir()
    elif what == "dangling":
        path.symlink_to(tmp_path / "gone.jsonl")
    return path


@pytest.mark.parametrize("check, answers", CHECKS, ids=["manifest", "results"])
@pytest.mark.parametrize("what", ["file", "fifo", "folder", "none", "dangling"])
def test_a_path_is_looked_at_once_with_the_same_answer(tmp_path, monkeypatch, check, answers, what):
    path = _make(tmp_path, what)
    stats, opens = calls_on(monkeypatch, "stat", path), calls_on(monkeypatch, "open", path)
    answer = check(path)
    monkeypatch.undo()
    expected = answers[what]
    assert answer == (None if expected is None else expected.format(path=path))
    assert len(stats + opens) == 1, (stats, opens)  # a stat, or (the results file, read whole) an O_PATH open
