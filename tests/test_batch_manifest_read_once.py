"""Whose a bad line's or repeat line's row is (`graph.batch_manifest_file`) is judged against the manifest file whose
lines the run read (`graph.batch_manifest.manifest_items`: the fstat of the read), not a stat of its name made later:
an editor's save by a rename between the read and the resume's bookkeeping made "this file now" another file than the
one read, so a row recording the very file read was taken for another manifest's and stayed beside the new one."""

from __future__ import annotations

from pathlib import Path

from graph import batch_manifest
from graph.cli import app
from tests.cli_agent_helpers import _scripted, runner
from tests.graph_scripts import square_clips
from tests.test_batch_manifest_lines import TASK, _rows, _write


def _run(monkeypatch, folder: Path, out: Path, shell: Path) -> None:
    """`cd <shell>; raa score-batch m.jsonl`, the process in `folder` (the link's target)."""
    monkeypatch.chdir(folder)
    monkeypatch.setenv("PWD", str(shell))
    res = runner.invoke(app, ["score-batch", "m.jsonl", "--out", str(out), "--preset", "decomposed"])
    assert res.exit_code == 0, res.output


def _moved_into_a_linked_folder(tmp_path: Path) -> Path:
    """day/m.jsonl moved (the same file) into day2/, day/ removed and made a link to day2: the rows written before
    record day/m.jsonl's name and folder, and the file the run reads."""
    (tmp_path / "day2").mkdir()
    (tmp_path / "day" / "m.jsonl").rename(tmp_path / "day2" / "m.jsonl")
    (tmp_path / "day").rmdir()
    (tmp_path / "day").symlink_to(tmp_path / "day2", target_is_directory=True)
    return tmp_path / "day2" / "m.jsonl"


def _saved_right_after_the_read(monkeypatch, manifest: Path) -> list[str]:
    """An editor saves `manifest` by a rename (the same bytes, a new file) just after the run read it, once: the names
    it was read by when saved (to assert the save happened: without it the tests pass on the old code too)."""
    real = batch_manifest.read_file
    saved = []

    def read_then_save(path):  # noqa: ANN001, ANN202
        found = real(path)
        if not saved and Path(path).resolve() == manifest.resolve():
            saved.append(path)
            (manifest.parent / "new.jsonl").write_bytes(manifest.read_bytes())
            (manifest.parent / "new.jsonl").replace(manifest)
        return found

    monkeypatch.setattr(batch_manifest, "read_file", read_then_save)
    return saved


def test_a_bad_lines_row_recording_the_file_read_is_replaced_though_a_save_follows_the_read(monkeypatch, tmp_path):
    _scripted(monkeypatch, tmp_path)
    (tmp_path / "day").mkdir()
    (tmp_path / "day" / "m.jsonl").write_text("{not json\n")
    out = tmp_path / "out.jsonl"
    _run(monkeypatch, tmp_path / "day", out, tmp_path / "day")
    assert len(_rows(out)) == 1, _rows(out)
    manifest = _moved_into_a_linked_folder(tmp_path)
    saved = _saved_right_after_the_read(monkeypatch, manifest)
    _run(monkeypatch, tmp_path / "day2", out, tmp_path / "day")
    assert saved, "the save after the read did not happen"
    assert len(_rows(out)) == 1, _rows(out)


def test_a_repeat_row_recording_the_file_read_goes_though_a_save_follows_the_read(monkeypatch, tmp_path):
    """The repeat line given a "condition" since (in place: the same file): the old row holds no line of the manifest
    as it is, so only the file it records tells it is this manifest's."""
    _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 1)
    clip = str(tmp_path / "c0.mp4")
    lines = [{"path": clip, "instruction": TASK, "id": i} for i in ("a1", "a2")]
    (tmp_path / "day").mkdir()
    _write(tmp_path / "day" / "m.jsonl", lines)
    out = tmp_path / "out.jsonl"
    _run(monkeypatch, tmp_path / "day", out, tmp_path / "day")
    assert sum("repeat_of" in r for r in _rows(out)) == 1, _rows(out)
    manifest = _moved_into_a_linked_folder(tmp_path)
    _write(manifest, [lines[0], {**lines[1], "condition": "x"}])  # in place: the same file
    saved = _saved_right_after_the_read(monkeypatch, manifest)
    _run(monkeypatch, tmp_path / "day2", out, tmp_path / "day")
    assert saved, "the save after the read did not happen"
    rows = _rows(out)
    assert sorted(r["manifest"]["id"] for r in rows) == ["a1", "a2"], rows
    assert [r["manifest"] for r in rows if "repeat_of" in r] == [{"id": "a2", "condition": "x"}], rows
