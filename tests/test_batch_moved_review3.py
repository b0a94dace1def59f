"""Third review of the moved-rows resume (`graph.batch_moved`): a run from inside the link left at a moved folder, a
link re-pointed to other clips, the cost of the search over other manifests' rows, and what the clip stamp tells
apart."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from graph.cli import app
from tests.graph_scripts import square_clips
from tests.test_batch_moved_clips import TASK, _manifest_in_clips, _move, _rows, _setup
from tests.test_cli_agent import _scripted

runner = CliRunner()


def test_a_moved_manifest_run_from_inside_the_link_replaces_its_bad_lines_row(monkeypatch, tmp_path):
    """The manifest in the clips' folder, which moved with a link left at its old name, run from inside the link by a
    relative name (`cd clips; raa score-batch m.jsonl`): the process's working directory is the link's target (the
    shell's $PWD names the link), so neither the manifest's resolved name nor its absolute one is the name its bad
    line's row was keyed by; that row stayed beside the new one, for good (3 lines, 4 rows)."""
    manifest, out = _manifest_in_clips(monkeypatch, tmp_path)
    args = ["score-batch", "m.jsonl", "--out", str(out), "--preset", "decomposed"]
    monkeypatch.chdir(tmp_path / "clips")
    monkeypatch.setenv("PWD", str(tmp_path / "clips"))
    assert runner.invoke(app, args).exit_code == 0
    assert len(_rows(out)) == 3
    monkeypatch.chdir(tmp_path)
    _move(tmp_path)
    monkeypatch.chdir(tmp_path / "clips")  # the process's directory: store/clips; the shell's: clips
    for _ in range(2):
        res = runner.invoke(app, args)
        assert res.exit_code == 0 and "0 to score" in res.output and "warning" not in res.output, res.output
        rows = _rows(out)
        assert len(rows) == 3, [(r["line"], r["path"]) for r in rows]
        assert sorted(r["line"] for r in rows) == [1, 2, 3]


def test_a_stale_pwd_or_a_name_leading_elsewhere_is_not_taken_for_the_manifests_name(monkeypatch, tmp_path):
    """$PWD left by a parent that changed directory since names another folder: not the shell's working directory.
    A name of the manifest through the link that, read without its "..", is another file (a manifest there sharing
    the output would have its bad lines' rows removed with this one's) is not one of its names."""
    from pathlib import Path

    from graph.batch_manifest import given_names, shell_cwd

    for name in ("a", "b", "a/sub"):
        (tmp_path / name).mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "a", target_is_directory=True)
    monkeypatch.chdir(tmp_path / "a")
    assert shell_cwd(str(tmp_path / "link")) == str(tmp_path / "link")
    assert shell_cwd(str(tmp_path / "b")) is None  # another folder
    assert shell_cwd("link") is None and shell_cwd(None) is None and shell_cwd(str(tmp_path / "gone")) is None
    (tmp_path / "a" / "m.jsonl").write_text("")
    assert given_names(Path("m.jsonl"), str(tmp_path / "link")) == [str(tmp_path / "a" / "m.jsonl"),
                                                                     str(tmp_path / "link" / "m.jsonl")]
    assert given_names(Path("m.jsonl")) == [str(tmp_path / "a" / "m.jsonl")]
    (tmp_path / "b" / "m.jsonl").write_text("")  # another manifest
    (tmp_path / "a" / "to_b").symlink_to(tmp_path / "b" / "sub2", target_is_directory=True)
    (tmp_path / "b" / "sub2").mkdir()
    # "to_b/../m.jsonl" is b/m.jsonl to the system, a/m.jsonl (another file) without its ".."
    assert given_names(Path("to_b/../m.jsonl"), str(tmp_path / "link")) == []


def test_a_manifest_named_through_a_link_and_dotdot_keeps_another_manifests_bad_line_row(monkeypatch, tmp_path):
    """Two manifests sharing an output, each with a bad line 1: b/m.jsonl run as "to_b/../m.jsonl" from folder a,
    where to_b links into b: its name without the ".." is a/m.jsonl, the other manifest, whose bad line's row went
    with this one's (rewritten only at that manifest's next run)."""
    _scripted(monkeypatch, tmp_path)
    for name in ("a", "b", "b/sub"):
        (tmp_path / name).mkdir()
    (tmp_path / "a" / "to_b").symlink_to(tmp_path / "b" / "sub", target_is_directory=True)
    for name in ("a", "b"):
        (tmp_path / name / "m.jsonl").write_text("{not json\n")
    out = tmp_path / "out.jsonl"
    assert runner.invoke(app, ["score-batch", str(tmp_path / "a" / "m.jsonl"), "--out", str(out)]).exit_code == 0
    monkeypatch.chdir(tmp_path / "a")
    monkeypatch.delenv("PWD", raising=False)
    res = runner.invoke(app, ["score-batch", "to_b/../m.jsonl", "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = _rows(out)
    assert len(rows) == 2 and len({r["key"] for r in rows}) == 2, rows


def _repoint(tmp_path, n: int = 2) -> None:
    """clips/ (a folder) renamed day1/, and clips made a link to day2/, other clips under the same names."""
    (tmp_path / "clips").rename(tmp_path / "day1")
    (tmp_path / "day2").mkdir()
    square_clips(tmp_path / "day2", n + 1)
    for i in range(n):  # c0 <- c1 <- c2 ...: each name another video
        (tmp_path / "day2" / f"c{i + 1}.mp4").replace(tmp_path / "day2" / f"c{i}.mp4")
    (tmp_path / "clips").symlink_to(tmp_path / "day2", target_is_directory=True)


@pytest.mark.parametrize("ids", [False, True])
def test_a_link_re_pointed_to_other_clips_warns_once_then_runs_quietly(monkeypatch, tmp_path, ids):
    """`clips -> day1` re-pointed to day2 (other clips under the same names): the run after says once that the day-1
    rows are not taken and scores day 2's clips; once they hold their own rows, the next runs say nothing of the
    day-1 rows as moved ones (before: at every run, until deleted). Lines with an "id": the day-1 rows carry it too,
    and are named as rows of an edited line are (`raa eval compare --pair-by id` finds each id twice). Every row
    stays."""
    manifest, out, args = _setup(monkeypatch, tmp_path, 2)
    if not ids:
        manifest.write_text("".join(json.dumps({"path": f"clips/c{i}.mp4", "instruction": TASK}) + "\n"
                                    for i in range(2)))
    assert runner.invoke(app, args).exit_code == 0
    day1 = {r["key"]: r["result"] for r in _rows(out)}
    _repoint(tmp_path)
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "2 to score" in res.output, res.output
    assert res.output.count("warning") == 1 and "2 row(s) whose run" in res.output, res.output
    for extra in ([], [], ["--retry-ineligible"]):
        res = runner.invoke(app, args + extra)
        assert res.exit_code == 0 and "0 to score" in res.output and "whose run" not in res.output, res.output
        assert res.output.count("warning") == ids, res.output
        assert not ids or "2 row(s) already in" in res.output and "carry the fields of a line" in res.output
    rows = _rows(out)
    assert len(rows) == 4 and {r["key"]: r["result"] for r in rows if r["key"] in day1} == day1


def test_rows_named_until_their_item_holds_its_own_row(tmp_path):
    """A row of another file under the item's clip path is named while the item has no row of its own; after, only
    a row recording no clip but holding a reward (maybe the clip's own, scored twice) is."""
    from graph.batch import item_key
    from graph.batch_moved import moved_rows
    from tests.test_batch_moved_clips import _linked_clip, _output

    item, path, stamp = _linked_clip(tmp_path)
    base = {"key": item_key(path, TASK, "full"), "path": path, "instruction": TASK, "preset": "full", "draw": 0}
    other = {**base, "clip": {**stamp, "size": 9}, "result": {"status": "scored", "reward": 0.5}}
    unstamped = {**base, "result": {"status": "scored", "reward": 0.4}}
    faulted = {**base, "result": {"status": "ineligible", "reward": None,
                                  "reasons": ["quality: video: not found"]}}
    own = {**base, "key": item["key"], "path": item["path"], "clip": stamp, "result": {"status": "scored", "reward": 0.7}}
    rows = [other, unstamped, faulted]
    assert moved_rows(_output(tmp_path, rows), [item], "full", 0).changed == rows
    moved = moved_rows(_output(tmp_path, [*rows, own]), [item], "full", 0)
    assert moved.changed == [unstamped] and moved.rekeyed == 0


def test_a_path_shared_by_many_rows_is_looked_up_once_per_resume(monkeypatch, tmp_path):
    """Rows of other clips with a line's instruction, preset and draw (another generator's outputs concatenated into
    the shared output: each path many times): the moved-row search reads each path's link once, however many rows
    name it (calls counted, not timed)."""
    import os
    from collections import Counter

    from graph.batch import item_key
    from graph.batch_moved import moved_rows
    from tests.test_batch_moved_clips import _output

    (tmp_path / "mine").mkdir()
    (tmp_path / "gen").mkdir()
    clip = tmp_path / "mine" / "a.mp4"
    clip.write_bytes(b"x")
    item = {"key": item_key(str(clip), TASK, "full"), "path": str(clip), "resolved": str(clip), "instruction": TASK,
            "error": None}
    paths = [str(tmp_path / "gen" / f"v{i}.mp4") for i in range(3)]
    (tmp_path / "gen" / "v2.mp4").symlink_to(tmp_path / "elsewhere.mp4")  # a link, to no file
    rows = [{"key": item_key(p, TASK, "full"), "path": p, "instruction": TASK, "preset": "full", "draw": 0,
             "result": {"status": "scored", "reward": 0.5}} for _ in range(20) for p in paths]
    asked: Counter[str] = Counter()
    real = os.readlink

    def counted(path, *args, **kwargs):
        asked[str(path)] += 1
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "readlink", counted)
    moved = moved_rows(_output(tmp_path, rows), [item], "full", 0)
    monkeypatch.undo()
    assert moved.rekeyed == 0 and not moved.left and not moved.changed and moved.output.values == rows
    assert all(asked[p] <= 1 for p in paths) and asked[paths[2]] == 1, asked


def test_a_link_re_pointed_to_other_clips_of_the_same_size_and_times_takes_no_row(tmp_path):
    """clips -> day1 re-pointed to day2, whose clips are other videos of the same sizes and modification times (an
    archive unpacked with fixed times; raw clips of one length): the size and mtime a day-1 row records are the
    day-2 clip's, and the day-1 reward was re-keyed to the day-2 clip. The file's identity (inode, device) recorded
    too tells them apart; a clip copied with its times kept (`cp -p`, the same content) is another file too, scored
    again (module docstring)."""
    import os

    from graph.batch import clip_stamp, item_key
    from graph.batch_moved import moved_rows
    from tests.test_batch_moved_clips import _output

    for day, data in (("day1", b"first video"), ("day2", b"other video")):
        (tmp_path / day).mkdir()
        (tmp_path / day / "c0.mp4").write_bytes(data)
        os.utime(tmp_path / day / "c0.mp4", ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    (tmp_path / "clips").symlink_to(tmp_path / "day1", target_is_directory=True)
    path = str(tmp_path / "clips" / "c0.mp4")
    day1 = {"key": item_key(str(tmp_path / "day1" / "c0.mp4"), TASK, "full"), "path": path, "instruction": TASK,
            "preset": "full", "draw": 0, "clip": clip_stamp(path), "result": {"status": "scored", "reward": 0.9}}
    (tmp_path / "clips").unlink()
    (tmp_path / "clips").symlink_to(tmp_path / "day2", target_is_directory=True)
    clip = str(tmp_path / "day2" / "c0.mp4")
    item = {"key": item_key(clip, TASK, "full"), "path": path, "resolved": clip, "instruction": TASK, "error": None}
    moved = moved_rows(_output(tmp_path, [day1]), [item], "full", 0)
    assert moved.rekeyed == 0 and moved.changed == [day1], moved.output.values
    before = {**day1, "clip": {k: day1["clip"][k] for k in ("size", "mtime_ns")}}  # written before rows recorded more
    assert moved_rows(_output(tmp_path, [before]), [item], "full", 0).rekeyed == 1  # told apart by nothing: taken


def test_a_copy_with_its_times_kept_is_unchanged_content_but_another_file(tmp_path):
    """`--retry-ineligible` asks size and time (a copy with its times kept, or a row written before the inode was
    recorded, is unchanged: its video fault stays final); a moved row is taken only for the very file."""
    from graph.batch import clip_stamp, same_file, stamp_unchanged

    clip = tmp_path / "a.mp4"
    clip.write_bytes(b"video")
    copy = tmp_path / "b.mp4"
    shutil.copy2(clip, copy)  # cp -p
    recorded, now = clip_stamp(str(clip)) or {}, clip_stamp(str(copy)) or {}
    assert stamp_unchanged(recorded, now) and not same_file(recorded, now)
    old = {"size": recorded["size"], "mtime_ns": recorded["mtime_ns"]}  # a row written before
    assert stamp_unchanged(old, now) and same_file(old, now) and same_file(recorded, recorded)
    assert not stamp_unchanged({**old, "size": 1}, now) and not stamp_unchanged({"size": recorded["size"]}, now)
