"""`raa score-batch` stopped by Ctrl-C in the windows the other Ctrl-C paths did not cover: the checks of which rows go
(`--retry-ineligible`: a clip's readability asked of the file system), the output prepared for rows (`RowWriter`'s cut
of a torn last line, `drop_rows`' rewrite), and the removal of other manifests' old copies once the batch ended
(`drop_replaced`). Each ended with a traceback and nothing said; each now says what the file holds and that the same
command runs (or resumes) the batch, and loses no row."""

from __future__ import annotations

import pytest

from graph.cli import app
from tests.cli_agent_helpers import _scripted, runner
from tests.test_batch_manifest_lines import _rows
from tests.test_batch_repeat_rows_shared import first_row_deleted

OTHER = '{"key": "other", "result": {"status": "ineligible", "reasons": ["observe: transport: x"]}}\n'


def _interrupt(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
    raise KeyboardInterrupt


def test_a_ctrl_c_while_the_rows_to_retry_are_checked_says_the_output_is_as_it_was(monkeypatch, tmp_path) -> None:
    """Whether a row goes (`stale_rows`) asks the file system of its clip (`clip_readable`, `clip_stamp`: a slow
    network mount); a Ctrl-C there, before any row is written or removed, went unsaid."""
    from graph import batch_resume
    from tests.graph_scripts import square_batch

    _scripted(monkeypatch, tmp_path)
    real = batch_resume.stale_rows

    def stale_rows(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        real(*args, **kwargs)
        return _interrupt  # every row asked about: Ctrl-C

    monkeypatch.setattr(batch_resume, "stale_rows", stale_rows)
    manifest = square_batch(tmp_path, 2)
    out = tmp_path / "results.jsonl"
    out.write_text(OTHER)
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed",
                              "--retry-ineligible"])
    assert res.exit_code == 130 and out.read_text() == OTHER, res.output
    assert res.stderr.strip().splitlines()[-1].startswith("interrupted before any clip was scored"), res.stderr


@pytest.mark.parametrize("where", ["graph.batch_output.mend_tail", "graph.batch_resume.write_text_atomic"])
def test_a_ctrl_c_while_the_output_is_prepared_says_so_and_loses_no_row(monkeypatch, tmp_path, where) -> None:
    """The torn last line cut (`RowWriter`) and the rewrite without the rows that go (`drop_rows`, here a torn line in
    the middle) come before any row is written: a Ctrl-C there says so and that the same command runs the batch."""
    from tests.graph_scripts import square_batch

    _scripted(monkeypatch, tmp_path)
    monkeypatch.setattr(where, _interrupt)
    manifest = square_batch(tmp_path, 2)
    out = tmp_path / "results.jsonl"
    before = OTHER + '{"key": "torn\n' + OTHER.replace("other", "other2") + '{"key": "tor'
    out.write_text(before)
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"])
    mended = before[:before.rindex("\n") + 1]  # the torn last line cut (its item is scored): no row lost
    assert res.exit_code == 130 and out.read_text() == (before if "mend_tail" in where else mended), res.output
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("interrupted before any clip was scored") and "the same command" in last, res.stderr


def test_a_ctrl_c_while_old_copies_are_removed_says_what_was_written(monkeypatch, tmp_path) -> None:
    """Once the batch wrote its rows, other manifests' old copies replaced by new ones are removed (`drop_replaced`);
    a Ctrl-C there ended with a traceback, before the closing line: the rows written and their cost went unsaid."""
    from graph import batch_repeat_rows

    _scripted(monkeypatch, tmp_path)
    monkeypatch.setenv("RAA_CACHE_PATH", "off")
    out, a, b = first_row_deleted(tmp_path)
    monkeypatch.setattr(batch_repeat_rows, "write_text_atomic", _interrupt)
    res = runner.invoke(app, ["score-batch", str(a), "--out", str(out), "--preset", "decomposed"])
    assert res.exit_code == 130, res.output
    assert "scored=3 zero=0 ineligible=0  usage: calls=" in res.stderr, res.stderr  # the closing line: rows, cost
    assert "interrupted" in res.stderr and "the next run removes them" in res.stderr, res.stderr
    assert sorted(r["manifest"]["id"] for r in _rows(out)) == ["a1", "a2", "b2", "b2"], _rows(out)  # none lost


def test_a_ctrl_c_as_the_output_is_read_for_the_closing_hint_says_every_row_is_in(monkeypatch, tmp_path) -> None:
    """After an ineligible row the run reads the output once more for the rows a rerun can fix; a Ctrl-C in that read
    (a slow mount) ended with a traceback, though one in the hint just after it was said."""
    from graph import batch
    from tests.graph_scripts import square_batch

    _scripted(monkeypatch, tmp_path)
    manifest = square_batch(tmp_path, 1)
    manifest.write_text(manifest.read_text() + "not json\n")  # a bad line: an ineligible row, so the hint is said
    out = tmp_path / "results.jsonl"
    real = batch.read_output

    def read_output(path):  # noqa: ANN001, ANN202
        if path.exists() and "ineligible" in path.read_text():  # the read at the end, once the rows are written
            raise KeyboardInterrupt
        return real(path)

    monkeypatch.setattr(batch, "read_output", read_output)
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"])
    assert res.exit_code == 130, res.output
    assert "scored=1 zero=0 ineligible=1" in res.stderr, res.stderr
    assert res.stderr.strip().splitlines()[-1].startswith("interrupted: every row of this run is in"), res.stderr
    assert len(_rows(out)) == 2, _rows(out)
