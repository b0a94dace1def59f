"""`tools.jsonl`'s lenient reader, its rewrite and its mend (`json_objects`, `keep_rows`, `mend_tail`) asked
`Path.is_file`, then read or opened the file by name: a file removed in between (a run folder cleaned while `raa train
report` reads its metrics log, a results file removed while a batch starts) raised a bare FileNotFoundError where
the file not being there is their documented answer (([], 0); 0 rows dropped; nothing to mend). Now each reads from
one look (`tools.file_kinds.read_at`), or takes a file gone after its look as not there (`mend_tail`, which opens it
for writing)."""

from __future__ import annotations

import json

from tests.path_calls import removed_after_first_look
from tools.jsonl import json_objects, keep_rows, mend_tail

ROWS = [{"iteration": 1}, {"iteration": 2}]


def _log(tmp_path, tail: str = ""):
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS) + tail)
    return path


def test_json_objects_of_a_file_removed_after_its_look_is_all_or_none(tmp_path, monkeypatch):
    path = _log(tmp_path)
    seen = removed_after_first_look(monkeypatch, path)
    got = json_objects(path)
    monkeypatch.undo()
    assert seen and not path.exists()
    assert got in ((ROWS, 0), ([], 0)), got


def test_keep_rows_of_a_file_removed_after_its_look_drops_nothing_or_rewrites_it_whole(tmp_path, monkeypatch):
    path = _log(tmp_path)
    seen = removed_after_first_look(monkeypatch, path)
    dropped = keep_rows(path, lambda row: row["iteration"] < 2)
    monkeypatch.undo()
    assert seen
    assert (dropped, path.exists()) in ((0, False), (1, True)), (dropped, path.exists())
    if path.exists():  # read whole by its one look, then rewritten without the row
        assert [json.loads(line) for line in path.read_text().splitlines()] == ROWS[:1]


def test_mend_tail_of_a_file_removed_after_its_look_mends_nothing(tmp_path, monkeypatch):
    path = _log(tmp_path, '{"iteration": 3')
    seen = removed_after_first_look(monkeypatch, path)
    mend_tail(path)
    monkeypatch.undo()
    assert seen and not path.exists()
