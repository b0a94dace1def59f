"""`raa eval report` reads results.jsonl once (`evals.result_rows.results_lines`): it read the whole file to refuse
one that is not UTF-8, then read it again to parse its lines; a results file grows with every run of the folder, and
`raa eval reward` may append to it between the two reads."""

from __future__ import annotations

import json

import pytest

from evals.result_rows import REWARD_ADVICE, ManifestError, results_lines
from tests.path_calls import calls_on


def test_results_jsonl_is_opened_once(tmp_path, monkeypatch):
    results = tmp_path / "results.jsonl"
    row = {"path": "/a.mp4", "preset": "full", "label": "failure", "reward": 0.9, "status": "scored"}
    results.write_text(json.dumps(row) + "\n" + "not json\n")
    opened = calls_on(monkeypatch, "open", results)
    lines, skipped = results_lines(results, REWARD_ADVICE)
    monkeypatch.undo()
    assert lines == {("/a.mp4", "full"): (f"{results}:1", row)}
    assert [(s.line, s.reason) for s in skipped] == [(f"{results}:2", "not valid JSON (Expecting value)")]
    assert len(opened) == 1, opened


def test_a_results_file_that_is_not_utf8_is_still_refused_whole(tmp_path):
    results = tmp_path / "results.jsonl"
    results.write_bytes(b'{"path": "/caf\xe9.mp4", "preset": "full"}\n')
    with pytest.raises(ManifestError, match=r"is not UTF-8 text \(byte 0xe9 at offset 14\)"):
        results_lines(results, REWARD_ADVICE)


def test_a_results_path_that_is_no_file_is_looked_at_once(tmp_path, monkeypatch):
    """Whether results.jsonl is a file, nothing, or something else (here a folder) is one look
    (`tools.file_kinds.read_at`: an O_PATH open on Linux, a stat elsewhere), not `exists` and then `is_file`."""
    results = tmp_path / "results.jsonl"
    results.mkdir()
    stats, opens = calls_on(monkeypatch, "stat", results), calls_on(monkeypatch, "open", results)
    with pytest.raises(ManifestError, match=rf"^{results} is not a file: results are written there"):
        results_lines(results, REWARD_ADVICE)
    monkeypatch.undo()
    assert len(stats + opens) == 1, (stats, opens)
    assert results_lines(tmp_path / "none.jsonl", REWARD_ADVICE) == ({}, [])
