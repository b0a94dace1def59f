"""A name that leads to this manifest now (a link re-pointed at another folder, entered with `cd`) is not proof that
the rows written under it were this manifest's: `mv day day1; ln -s day2 day; cd day; raa score-batch m.jsonl` took
day 1's bad line's row and its repeat rows (which hold rewards) for day 2's, and removed them until day 1 ran again.
Rows of bad and repeat lines record the manifest's file identity ("manifest_file_id": inode and device) and are taken
for this manifest's through such a name only when it is this file's (`graph.batch_manifest` docstring)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from graph.batch_manifest_file import file_id
from graph.cli import app
from tests.cli_agent_helpers import _scripted, runner
from tests.graph_scripts import square_clips
from tests.test_batch_manifest_lines import TASK, _rows, _write


def _run(monkeypatch, folder: Path, out: Path, shell: Path | None = None) -> str:
    """`cd <shell or folder>; raa score-batch m.jsonl`: the process in `folder`, the shell's $PWD `shell`."""
    monkeypatch.chdir(folder)
    monkeypatch.setenv("PWD", str(shell or folder))
    res = runner.invoke(app, ["score-batch", "m.jsonl", "--out", str(out), "--preset", "decomposed"])
    assert res.exit_code == 0, res.output
    return res.output


def _repoint(tmp_path: Path, lines: list[str]) -> None:
    """day/ renamed day1/; day2/m.jsonl made of `lines`; day made a link to day2."""
    (tmp_path / "day").rename(tmp_path / "day1")
    (tmp_path / "day2").mkdir()
    (tmp_path / "day2" / "m.jsonl").write_text("".join(line + "\n" for line in lines))
    (tmp_path / "day").symlink_to(tmp_path / "day2", target_is_directory=True)


def _moved_then_saved(monkeypatch, tmp_path: Path, first: list, saved: list) -> Path:
    """day/m.jsonl made of `first` and run; mv day day1; ln -s day1 day; day1/m.jsonl saved by a rename (a new inode)
    as `saved`. The output file."""
    (tmp_path / "day").mkdir()
    _write(tmp_path / "day" / "m.jsonl", first)
    out = tmp_path / "out.jsonl"
    _run(monkeypatch, tmp_path / "day", out)
    (tmp_path / "day").rename(tmp_path / "day1")
    (tmp_path / "day").symlink_to(tmp_path / "day1", target_is_directory=True)
    _write(tmp_path / "day1" / "new.jsonl", saved)
    (tmp_path / "day1" / "new.jsonl").replace(tmp_path / "day1" / "m.jsonl")  # saved by a rename: a new inode
    return out


def test_a_link_re_pointed_to_another_manifest_keeps_the_old_ones_bad_line_row(monkeypatch, tmp_path):
    _scripted(monkeypatch, tmp_path)
    (tmp_path / "day").mkdir()
    (tmp_path / "day" / "m.jsonl").write_text("{not json\n")
    out = tmp_path / "out.jsonl"
    _run(monkeypatch, tmp_path / "day", out)
    day1 = _rows(out)
    assert len(day1) == 1 and day1[0]["path"] == "<line 1>"
    _repoint(tmp_path, ["{also not json"])
    for _ in range(2):  # the process in day2, the shell's name of it day (the link)
        _run(monkeypatch, tmp_path / "day2", out, shell=tmp_path / "day")
        rows = _rows(out)
        assert len(rows) == 2 and day1[0] in rows, rows
    _run(monkeypatch, tmp_path / "day1", out)  # day 1 run again: its own row replaced, day 2's kept
    rows = _rows(out)
    assert len(rows) == 2 and len({r["key"] for r in rows}) == 2, rows


def test_a_link_re_pointed_to_another_manifest_keeps_the_old_ones_repeat_rows(monkeypatch, tmp_path):
    """Both days list one clip twice under other ids: day 1's repeat row (a reward) recorded the name day/m.jsonl,
    which leads to day 2's manifest now; it went, its id missing from the output until day 1 ran again."""
    _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 1)
    clip = str(tmp_path / "c0.mp4")
    (tmp_path / "day").mkdir()
    _write(tmp_path / "day" / "m.jsonl", [{"path": clip, "instruction": TASK, "id": i} for i in ("a1", "a2")])
    out = tmp_path / "out.jsonl"
    _run(monkeypatch, tmp_path / "day", out)
    repeat = [r for r in _rows(out) if "repeat_of" in r]
    assert len(repeat) == 1 and repeat[0]["result"]["reward"] is not None
    _repoint(tmp_path, [json.dumps({"path": clip, "instruction": TASK, "id": i}) for i in ("b1", "b2")])
    for _ in range(2):
        _run(monkeypatch, tmp_path / "day2", out, shell=tmp_path / "day")
        rows = _rows(out)
        assert repeat[0] in rows, rows
        assert sorted(r["manifest"]["id"] for r in rows) == ["a2", "b1", "b2"], rows
    _run(monkeypatch, tmp_path / "day1", out)  # day 1 again: its repeat row known by its file, written under its key
    rows = _rows(out)  # (the clip's one row takes the fields of the manifest run last, as any shared row)
    assert sorted(r["manifest"]["id"] for r in rows) == ["a1", "a2", "b2"], rows
    assert len(rows) == len({r["key"] for r in rows}) == 3
    assert {r["result"]["reward"] for r in rows if "repeat_of" in r} == {repeat[0]["result"]["reward"]}


def test_a_moved_manifests_bad_line_row_is_known_by_its_file(monkeypatch, tmp_path):
    """The manifest's folder moved (no link left): no name of it leads to the one its bad line's row was keyed by, but
    the row records the manifest's file, so it is replaced, not left beside the new one."""
    _scripted(monkeypatch, tmp_path)
    (tmp_path / "day").mkdir()
    (tmp_path / "day" / "m.jsonl").write_text("{not json\n")
    out = tmp_path / "out.jsonl"
    _run(monkeypatch, tmp_path / "day", out)
    (tmp_path / "day").rename(tmp_path / "moved")
    _run(monkeypatch, tmp_path / "moved", out)
    assert len(_rows(out)) == 1, _rows(out)


def test_rows_recording_no_file_identity_keep_todays_reading(monkeypatch, tmp_path):
    """A bad line's row written before rows recorded the manifest's file: a name that leads to this manifest now (the
    link re-pointed) is taken as this manifest's, as before (nothing tells it apart)."""
    _scripted(monkeypatch, tmp_path)
    (tmp_path / "day").mkdir()
    (tmp_path / "day" / "m.jsonl").write_text("{not json\n")
    out = tmp_path / "out.jsonl"
    _run(monkeypatch, tmp_path / "day", out)
    out.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "manifest_file_id"}) + "\n"
                           for r in _rows(out)))
    _repoint(tmp_path, ["{also not json"])
    _run(monkeypatch, tmp_path / "day2", out, shell=tmp_path / "day")
    assert len(_rows(out)) == 1, _rows(out)


def test_a_reused_inode_does_not_take_another_existing_manifests_repeat_row(monkeypatch, tmp_path):
    """a.jsonl saved by an editor that renames (a new inode), then b.jsonl made (cp a b) reusing the inode a.jsonl's
    rows record: b's run took a's repeat row (a reward) for its own by that inode, though the name it records is
    a.jsonl's, a manifest there now that keys its rows by it; the row went, a2 missing until a ran again."""
    _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 1)
    clip, out = str(tmp_path / "c0.mp4"), tmp_path / "out.jsonl"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PWD", str(tmp_path))
    lines = [{"path": clip, "instruction": TASK, "id": i} for i in ("a1", "a2")]
    _write(tmp_path / "a.jsonl", lines)

    def run(name: str) -> None:
        res = runner.invoke(app, ["score-batch", name, "--out", str(out), "--preset", "decomposed"])
        assert res.exit_code == 0, res.output

    run("a.jsonl")
    _write(tmp_path / "new.jsonl", lines)
    (tmp_path / "new.jsonl").replace(tmp_path / "a.jsonl")  # saved by a rename: a new inode
    _write(tmp_path / "b.jsonl", [{"path": clip, "instruction": TASK, "id": i} for i in ("b1", "b2")])
    reused = file_id((tmp_path / "b.jsonl").stat())  # the inode a.jsonl had, as the file system may give it again
    out.write_text("".join(json.dumps({**r, "manifest_file_id": reused} if "repeat_of" in r else r) + "\n"
                           for r in _rows(out)))
    repeat = [r for r in _rows(out) if "repeat_of" in r]
    assert len(repeat) == 1 and repeat[0]["result"]["reward"] is not None
    run("b.jsonl")
    rows = _rows(out)
    assert repeat[0] in rows, rows
    assert sorted(r["manifest"]["id"] for r in rows) == ["a2", "b1", "b2"], rows


def test_a_manifest_moved_with_a_link_left_and_saved_by_a_rename_keeps_one_repeat_row(monkeypatch, tmp_path):
    """mv day day1; ln -s day1 day; an editor saves day1/m.jsonl by a rename (a new inode); run again: the repeat row
    recording day/m.jsonl (a name leading here) and the old inode was taken for another manifest's and kept, beside
    the row this run wrote under the manifest's new name: a2 twice in the output, at every run after."""
    _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 1)
    clip = str(tmp_path / "c0.mp4")
    lines = [{"path": clip, "instruction": TASK, "id": i} for i in ("a1", "a2")]
    out = _moved_then_saved(monkeypatch, tmp_path, lines, lines)
    for _ in range(2):
        _run(monkeypatch, tmp_path / "day1", out, shell=tmp_path / "day")
        rows = _rows(out)
        assert sorted(r["manifest"]["id"] for r in rows) == ["a1", "a2"], rows


def test_a_manifest_saved_by_a_rename_in_place_reads_as_before(monkeypatch, tmp_path):
    """The common case: the manifest stays where it is (entered through a link to its folder, too) and an editor saves
    it by a rename (a new inode at each save): its bad line's row is replaced, not kept beside the new one, and its
    repeat row is kept once, as before rows recorded files (the edit tests write in place: the same inode)."""
    _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 1)
    clip = str(tmp_path / "c0.mp4")
    lines = [json.dumps({"path": clip, "instruction": TASK, "id": i}) for i in ("a1", "a2")]
    (tmp_path / "day").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "day", target_is_directory=True)
    out = tmp_path / "out.jsonl"

    def save(rows: list[str]) -> None:  # an editor's save: a new file renamed over the manifest
        _write(tmp_path / "day" / "new.jsonl", rows)
        (tmp_path / "day" / "new.jsonl").replace(tmp_path / "day" / "m.jsonl")

    save([*lines, "{not json"])
    _run(monkeypatch, tmp_path / "day", out, shell=tmp_path / "link")
    first = _rows(out)
    assert len(first) == 3 and sum("repeat_of" in r for r in first) == 1, first
    for shell in (tmp_path / "link", tmp_path / "day"):
        save([*lines, "{still not json"])
        _run(monkeypatch, tmp_path / "day", out, shell=shell)
        rows = _rows(out)
        assert sorted(r["manifest"].get("id", "") for r in rows) == ["", "a1", "a2"], rows
        assert [r for r in first if "repeat_of" in r][0] in rows, rows
    save(lines)  # the bad line deleted: its row goes
    _run(monkeypatch, tmp_path / "day", out, shell=tmp_path / "link")
    assert sorted(r["manifest"].get("id", "") for r in _rows(out)) == ["a1", "a2"], _rows(out)


def test_a_manifest_moved_with_a_link_left_and_saved_by_a_rename_with_a_line_changed_keeps_one_row(monkeypatch,
                                                                                                    tmp_path):
    """As above, but the save also adds a field to the repeat line (a2 given a "condition"): the old row, recording
    day/m.jsonl and the old inode, holds no line of the manifest as it is now."""
    _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 1)
    clip = str(tmp_path / "c0.mp4")
    lines = [{"path": clip, "instruction": TASK, "id": i} for i in ("a1", "a2")]
    out = _moved_then_saved(monkeypatch, tmp_path, lines, [lines[0], {**lines[1], "condition": "x"}])
    for _ in range(2):
        _run(monkeypatch, tmp_path / "day1", out, shell=tmp_path / "day")
        rows = _rows(out)
        assert sorted(r["manifest"]["id"] for r in rows) == ["a1", "a2"], rows


def test_a_manifest_moved_with_a_link_left_and_saved_by_a_rename_keeps_one_bad_line_row(monkeypatch, tmp_path):
    """mv day day1; ln -s day1 day; day1/m.jsonl saved by a rename (a new inode), its line still bad; run through the
    link: the bad line's row keyed by day/m.jsonl, recording the old inode, stayed beside the new one for good."""
    _scripted(monkeypatch, tmp_path)
    out = _moved_then_saved(monkeypatch, tmp_path, ["{not json"], ["{still not json"])
    for _ in range(2):
        _run(monkeypatch, tmp_path / "day1", out, shell=tmp_path / "day")
        assert len(_rows(out)) == 1, _rows(out)


def test_a_reused_inode_does_not_take_another_existing_manifests_bad_line_row(monkeypatch, tmp_path):
    """As above for a bad line's row (a/m.jsonl saved by a rename, b/m.jsonl made on the inode a's row records): the
    row recorded no name of its manifest, only its file, so b's run took it for its own and removed it until a ran
    again. It records its manifest's name too ("manifest_file"), a manifest file's own name now: a's."""
    _scripted(monkeypatch, tmp_path)
    out = tmp_path / "out.jsonl"
    for day in ("a", "b"):
        (tmp_path / day).mkdir()
    (tmp_path / "a" / "m.jsonl").write_text("{not json\n")
    _run(monkeypatch, tmp_path / "a", out)
    (tmp_path / "a" / "new.jsonl").write_text("{not json\n")
    (tmp_path / "a" / "new.jsonl").replace(tmp_path / "a" / "m.jsonl")  # saved by a rename: a new inode
    (tmp_path / "b" / "m.jsonl").write_text("{also not json\n")
    reused = file_id((tmp_path / "b" / "m.jsonl").stat())  # the inode a's file had, as the system may give it again
    out.write_text("".join(json.dumps({**r, "manifest_file_id": reused}) + "\n" for r in _rows(out)))
    [row] = _rows(out)
    _run(monkeypatch, tmp_path / "b", out)
    rows = _rows(out)
    assert len(rows) == 2 and row in rows, rows
    _run(monkeypatch, tmp_path / "a", out)  # a again: its own row replaced, b's kept
    rows = _rows(out)
    assert len(rows) == 2 and len({r["key"] for r in rows}) == 2, rows


def test_a_hard_link_in_another_folder_keeps_one_bad_line_row(monkeypatch, tmp_path):
    """b/m.jsonl a hard link to a/m.jsonl (one file, two own names): a bad line's row written by a's run is b's run's
    own (the file it read, `graph.batch_manifest_file`), as a repeat row is (`recorded_manifest`). Taken for another
    manifest's by its recorded name (a's own name now), it stayed beside the row b wrote: the line twice for good."""
    _scripted(monkeypatch, tmp_path)
    out = tmp_path / "out.jsonl"
    for day in ("a", "b"):
        (tmp_path / day).mkdir()
    (tmp_path / "a" / "m.jsonl").write_text("{not json\n")
    os.link(tmp_path / "a" / "m.jsonl", tmp_path / "b" / "m.jsonl")
    for day in ("a", "b", "a"):
        _run(monkeypatch, tmp_path / day, out)
        rows = _rows(out)
        assert len(rows) == 1 and rows[0]["manifest_file"] == str(tmp_path / day / "m.jsonl"), (day, rows)
