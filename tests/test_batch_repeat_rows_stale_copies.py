"""Another manifest's copies of a row this run scores again (`graph.batch_repeat_rows.others_copies`) are written again
from the new row only as that manifest holds them now: a copy of a line deleted from it since (or whose fields changed
since) was written again as it stood, a stale row refreshed with a new result, which stayed until that manifest ran
again."""

from __future__ import annotations

from graph.cli import app
from tests.cli_agent_helpers import _scripted, runner
from tests.test_batch_manifest_lines import TASK, _rows, _write
from tests.test_batch_repeat_rows_shared import first_row_deleted


def _run(manifest, out) -> str:  # noqa: ANN001
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"])
    assert res.exit_code == 0, res.output
    return res.output


def test_a_copy_of_a_line_the_other_manifest_no_longer_has_is_not_written_again(monkeypatch, tmp_path):
    _scripted(monkeypatch, tmp_path)
    monkeypatch.setenv("RAA_CACHE_PATH", "off")
    out, a, b = first_row_deleted(tmp_path)
    _write(b, [{"path": "c0.mp4", "instruction": TASK, "id": "b1"}])  # b's repeat line b2 deleted since
    said = _run(a, out)
    assert "of other manifests" not in said, said
    assert sorted(r["manifest"]["id"] for r in _rows(out)) == ["a1", "a2"], _rows(out)


def test_a_copy_is_written_again_with_the_other_manifests_line_as_it_is_now(monkeypatch, tmp_path):
    _scripted(monkeypatch, tmp_path)
    monkeypatch.setenv("RAA_CACHE_PATH", "off")
    out, a, b = first_row_deleted(tmp_path)
    _write(b, [{"path": "c0.mp4", "instruction": TASK, "id": i} for i in ("b1", "b2-new")])  # its field since
    said = _run(a, out)
    assert "1 row(s) of other manifests sharing" in said, said
    rows = _rows(out)
    assert sorted(r["manifest"]["id"] for r in rows) == ["a1", "a2", "b2-new"], rows
    assert len({r["result"]["run_id"] for r in rows}) == 1, rows


def test_the_output_is_read_once_at_the_end_of_a_run(monkeypatch, tmp_path):
    """At its end a run read the output to remove other manifests' replaced copies (`drop_replaced`), then again for
    the rows a rerun can fix (said after an ineligible row): one read serves both, as the copies left it."""
    from graph import batch, batch_repeat_rows

    _scripted(monkeypatch, tmp_path)
    monkeypatch.setenv("RAA_CACHE_PATH", "off")
    out, a, b = first_row_deleted(tmp_path)
    a.write_text(a.read_text() + "not json\n")  # a bad line: an ineligible row, so the closing hint reads the file
    reads = []
    real = batch.read_output

    def counted(path):  # noqa: ANN001, ANN202
        reads.append(path)
        return real(path)

    for module in (batch, batch_repeat_rows):
        monkeypatch.setattr(module, "read_output", counted, raising=False)  # the second: where it was read
    said = _run(a, out)
    assert "1 row(s) of other manifests sharing" in said and "ineligible=1" in said, said
    assert reads == [out, out], reads  # the one read as the run starts, the one as it ends
    assert sorted(r["manifest"]["id"] for r in _rows(out) if "id" in r["manifest"]) == ["a1", "a2", "b2"], _rows(out)


def test_a_copy_stays_when_the_other_manifest_cannot_be_read(monkeypatch, tmp_path):
    """Another manifest there but unreadable now (permissions, an I/O error) may still hold the line: its copy is
    written again as it stood, as before copies followed that manifest's lines; it went, that manifest's id missing
    from the output until it ran again."""
    from graph import batch_repeat_rows

    _scripted(monkeypatch, tmp_path)
    monkeypatch.setenv("RAA_CACHE_PATH", "off")
    out, a, b = first_row_deleted(tmp_path)
    real = batch_repeat_rows.manifest_items

    def unreadable(manifest, *args):  # noqa: ANN001, ANN002, ANN202
        if manifest.resolve() == b.resolve():
            raise PermissionError(13, "Permission denied", str(manifest))
        return real(manifest, *args)

    monkeypatch.setattr(batch_repeat_rows, "manifest_items", unreadable)
    said = _run(a, out)
    assert "1 row(s) of other manifests sharing" in said, said
    rows = _rows(out)
    assert sorted(r["manifest"]["id"] for r in rows) == ["a1", "a2", "b2"], rows
    assert len({r["result"]["run_id"] for r in rows}) == 1, rows


def test_a_copy_stays_when_the_other_manifest_moved_leaving_a_link(monkeypatch, tmp_path):
    """The other manifest moved, a symlink left at the name its rows record: it still holds the line, under keys of
    its new name (its next run rewrites its rows under them); its copy is written again as it stood, not dropped."""
    _scripted(monkeypatch, tmp_path)
    monkeypatch.setenv("RAA_CACHE_PATH", "off")
    out, a, b = first_row_deleted(tmp_path)
    moved = tmp_path / "moved" / "b.jsonl"
    moved.parent.mkdir()
    b.rename(moved)
    b.symlink_to(moved)
    said = _run(a, out)
    assert "1 row(s) of other manifests sharing" in said, said
    rows = _rows(out)
    assert sorted(r["manifest"]["id"] for r in rows) == ["a1", "a2", "b2"], rows
    assert len({r["result"]["run_id"] for r in rows}) == 1, rows


def test_manifests_run_through_a_symlinked_folder_keep_their_copies_current(monkeypatch, tmp_path):
    """Run through a symlinked folder (a home or /tmp that is a link): a row records its manifest's resolved name,
    which is no link, so another manifest's copy is written again with its line as that manifest holds it now (not
    as it stood, as for a manifest moved with a link left), and that manifest's next run has nothing to write."""
    _scripted(monkeypatch, tmp_path)
    monkeypatch.setenv("RAA_CACHE_PATH", "off")
    (tmp_path / "real").mkdir()
    (tmp_path / "home").symlink_to(tmp_path / "real")
    out, a, b = first_row_deleted(tmp_path / "home")  # every run names the files through the link
    _write(b, [{"path": "c0.mp4", "instruction": TASK, "id": i} for i in ("b1", "b2-new")])
    said = _run(a, out)
    assert "1 row(s) of other manifests sharing" in said, said
    rows = _rows(out)
    assert sorted(r["manifest"]["id"] for r in rows) == ["a1", "a2", "b2-new"], rows
    assert len({r["result"]["run_id"] for r in rows}) == 1, rows
    said = _run(b, out)
    assert "0 to score" in said and "to take an earlier line's result" not in said, said
    assert sorted(r["manifest"]["id"] for r in _rows(out)) == ["a2", "b1", "b2-new"], _rows(out)


def test_each_other_manifest_is_read_once_per_run(monkeypatch, tmp_path):
    """Two other manifests with two copies each of a row this run scores again: each is read once, not per copy."""
    from graph import batch_repeat_rows

    _scripted(monkeypatch, tmp_path)
    monkeypatch.setenv("RAA_CACHE_PATH", "off")
    out, a, b = first_row_deleted(tmp_path)
    c = tmp_path / "c.jsonl"
    for manifest in (b, c):
        _write(manifest, [{"path": "c0.mp4", "instruction": TASK, "id": f"{manifest.stem}{i}"} for i in (1, 2, 3)])
        _run(manifest, out)
    out.write_text("".join(line for line in out.read_text().splitlines(keepends=True) if '"repeat_of"' in line))
    reads = []
    real = batch_repeat_rows.manifest_items

    def counted(manifest, *args):  # noqa: ANN001, ANN002, ANN202
        reads.append(manifest)
        return real(manifest, *args)

    monkeypatch.setattr(batch_repeat_rows, "manifest_items", counted)
    said = _run(a, out)
    assert "4 row(s) of other manifests sharing" in said, said
    assert sorted(reads) == [b, c], reads
    assert sorted(r["manifest"]["id"] for r in _rows(out)) == ["a1", "a2", "b2", "b3", "c2", "c3"], _rows(out)


def test_a_copy_of_a_manifest_whose_name_is_now_a_folder_goes_as_one_of_a_manifest_gone(monkeypatch, tmp_path):
    """The name another manifest's copies record is a folder now (the manifest moved away, a folder made there): it
    holds no line (score-batch refuses a folder as a manifest), yet it was taken for a manifest there that cannot be
    read, and its copy was written again as it stood at every run that scored the clip again, for good. It goes, as
    the copy of a manifest that is gone."""
    import json

    _scripted(monkeypatch, tmp_path)
    monkeypatch.setenv("RAA_CACHE_PATH", "off")
    out, a, b = first_row_deleted(tmp_path)
    b.unlink()
    b.mkdir()
    said = _run(a, out)
    assert "of other manifests" not in said, said
    assert sorted(r["manifest"]["id"] for r in _rows(out)) == ["a1", "a2"], _rows(out)
    out.write_text("".join(json.dumps(r) + "\n" for r in _rows(out) if "repeat_of" in r))  # scored again once more
    said = _run(a, out)
    assert "of other manifests" not in said and sorted(r["manifest"]["id"] for r in _rows(out)) == ["a1", "a2"], said
