"""A resume keeps the result of an item already in the output, but its row takes the manifest line's current
fields: the row kept the line number and the other fields ("id", "condition") of the run that scored it, so a field
added to or corrected in the manifest afterwards never reached the output, and `raa eval compare --pair-by id`
paired by the old value (or skipped the row as having no such field)."""

from __future__ import annotations

import json

import pytest

from graph.cli import app
from tests.cli_agent_helpers import runner
from tests.test_cli_score_batch import _scored_once


def test_a_resume_brings_kept_rows_to_the_manifest_lines_current_fields(monkeypatch, tmp_path) -> None:
    pytest.importorskip("graph.builder")
    args, out, res = _scored_once(monkeypatch, tmp_path)
    assert res.exit_code == 0, res.output
    before = json.loads(out.read_text())
    assert before["line"] == 1 and before["manifest"] == {}
    manifest = tmp_path / "manifest.jsonl"
    row = json.loads(manifest.read_text())
    manifest.write_text("\n" + json.dumps({**row, "id": "p7", "weight": float("nan")}) + "\n")
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "0 to score" in res.output, res.output
    assert "1 row(s) already in" in res.output and "manifest line's current fields" in res.output, res.output
    (after,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert after["line"] == 2 and after["manifest"] == {"id": "p7", "weight": None}
    assert {k: v for k, v in after.items() if k not in ("line", "manifest")} == \
        {k: v for k, v in before.items() if k not in ("line", "manifest")}  # the result and the rest stand
    text = out.read_text()
    res = runner.invoke(app, args)  # nothing changed since: the file is not rewritten (NaN read as null)
    assert res.exit_code == 0 and "current fields" not in res.output and out.read_text() == text, res.output


def test_a_resume_names_rows_left_from_an_edited_line(monkeypatch, tmp_path) -> None:
    """A line whose clip path (or instruction) was fixed is a new item, scored anew; its old row stayed beside the new
    one without a word, and `raa eval compare` (pairing by the manifest's "key") refused the output: "appears twice"."""
    pytest.importorskip("graph.builder")
    import shutil

    args, out, res = _scored_once(monkeypatch, tmp_path)
    manifest = tmp_path / "manifest.jsonl"
    row = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**row, "key": "k1"}) + "\n")
    assert runner.invoke(app, args).exit_code == 0  # the kept row takes the field
    shutil.copy(tmp_path / "m.mp4", tmp_path / "moved.mp4")
    manifest.write_text(json.dumps({**row, "path": "moved.mp4", "key": "k1"}) + "\n")
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "1 to score" in res.output, res.output
    assert (f"warning: 1 row(s) already in {out} carry the fields of a line of this manifest but another clip or "
            "instruction (first: line 1") in res.output, res.output
    assert len(out.read_text().splitlines()) == 2  # only named: whether it is stale is the researcher's call


def test_a_line_with_a_nan_field_is_matched_to_its_rows_as_they_hold_it(tmp_path) -> None:
    """A NaN field ("weight": NaN, which Python's json reads) is written as null: `edited_rows` matches a line to the
    rows carrying its fields as the rows hold them, so the old row of such a line edited to another clip is named
    (and one written with a literal NaN, before rows were strict JSON, too), and a row of another line is not."""
    from graph.batch import Output
    from graph.batch_resume import edited_rows

    item = {"key": "new", "line": 1, "path": "/c/b.mp4", "error": None, "manifest": {"id": "p7", "w": float("nan")}}
    row = {"key": "old", "line": 1, "path": "/c/a.mp4", "preset": "full", "draw": 0, "manifest": {"id": "p7", "w": None}}
    for manifest in ({"id": "p7", "w": None}, {"id": "p7", "w": float("nan")}):
        output = Output(tmp_path / "o.jsonl", [], [{**row, "manifest": manifest}], None, None)
        assert "1 row(s) already in" in (edited_rows(output, [item], "full", 0) or ""), manifest
    other = Output(tmp_path / "o.jsonl", [], [{**row, "manifest": {"id": "p7", "w": 1.0}}], None, None)
    assert edited_rows(other, [item], "full", 0) is None
