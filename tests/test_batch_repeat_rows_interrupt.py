"""Manifests a and b sharing one `--out`, both listing one clip (b's row of it a "repeat" copy of the first line's
row): that row deleted, a's run scores the clip again and b's copies are written again from its new row. They were
removed before scoring, so a run stopped before the new row was written (Ctrl-C, a crash, a full disk) left the output
without b's ids, and nothing of them was left for a's resume to write again. They stay as they are until the new row
is written, and a run that wrote it leaves one row per key."""

from __future__ import annotations

from graph.cli import app
from tests.cli_agent_helpers import _scripted, runner
from tests.test_batch_manifest_lines import _rows
from tests.test_batch_repeat_rows_shared import first_row_deleted


def _run(manifest, out, code=0) -> str:  # noqa: ANN001
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"])
    assert res.exit_code == code, res.output
    return res.output


def test_an_interrupted_rescore_keeps_other_manifests_copies_and_a_resume_replaces_them(monkeypatch, tmp_path):
    from graph import batch

    _scripted(monkeypatch, tmp_path)
    monkeypatch.setenv("RAA_CACHE_PATH", "off")  # the clip is scored again, not taken from the stage cache
    out, a, b = first_row_deleted(tmp_path)

    async def interrupted(*args):  # noqa: ANN002, ANN202 - Ctrl-C in the clip's run, before its row is written
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(batch, "run_batch", interrupted)
        said = _run(a, out, code=130)
    assert [r["manifest"]["id"] for r in _rows(out)] == ["b2"], said  # b's copy as it was (a's own: a's resume)
    said = _run(a, out)
    assert "1 row(s) of other manifests sharing" in said, said
    rows = _rows(out)
    assert sorted(r["manifest"]["id"] for r in rows) == ["a1", "a2", "b2"], rows  # one row per key
    assert len({r["result"]["run_id"] for r in rows}) == 1, rows  # every copy of the new row
    for manifest, ids in ((b, ["a2", "b1", "b2"]), (a, ["a1", "a2", "b2"])):  # nothing left to write or remove
        said = _run(manifest, out)  # (the shared first line's row takes the fields of the manifest run last)
        assert "of other manifests" not in said and "to take an earlier line's result" not in said, said
        assert sorted(r["manifest"]["id"] for r in _rows(out)) == ids and _rows(out)[1:] == rows[1:], _rows(out)


def test_old_copies_that_cannot_be_removed_are_said_and_the_next_run_removes_them(monkeypatch, tmp_path):
    """The file cannot be rewritten once the new copies are written (a full disk): the old copies stay beside them
    (the last of a key counts), a warning says so, and the next run of the other manifest leaves one row per key."""
    from graph import batch_repeat_rows

    model = _scripted(monkeypatch, tmp_path)
    monkeypatch.setenv("RAA_CACHE_PATH", "off")
    out, a, b = first_row_deleted(tmp_path)

    def full(*args):  # noqa: ANN002, ANN202
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(batch_repeat_rows, "write_text_atomic", full)
        said = _run(a, out)
    assert "warning: cannot remove" in said and "the next run removes them" in said, said
    assert sorted(r["manifest"]["id"] for r in _rows(out)) == ["a1", "a2", "b2", "b2"], _rows(out)
    calls = len(model.calls)
    _run(b, out)
    rows = _rows(out)
    assert sorted(r["manifest"]["id"] for r in rows) == ["a2", "b1", "b2"] and len(model.calls) == calls, rows
    assert len({r["result"]["run_id"] for r in rows}) == 1, rows


def test_a_ctrl_c_while_other_manifests_are_read_is_said_and_changes_nothing(monkeypatch, tmp_path):
    """A Ctrl-C as other manifests are read for the copies to write again (a slow mount), before the tools load:
    said as one before any clip was scored, the output as it was, exit 130; the same command then runs the batch."""
    from graph import batch_repeat_rows

    _scripted(monkeypatch, tmp_path)
    monkeypatch.setenv("RAA_CACHE_PATH", "off")
    out, a, b = first_row_deleted(tmp_path)
    before = out.read_text()

    def interrupted(*args):  # noqa: ANN002, ANN202
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(batch_repeat_rows, "manifest_items", interrupted)
        said = _run(a, out, code=130)
    assert "interrupted before any clip was scored" in said and "is as it was" in said, said
    assert out.read_text() == before
    _run(a, out)
    assert sorted(r["manifest"]["id"] for r in _rows(out)) == ["a1", "a2", "b2"], _rows(out)
