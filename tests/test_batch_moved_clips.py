"""`raa score-batch` resumed after the clips' folder moved with a symlink left at its old name: the rows written
before name the clips by the old name, which now leads to them, and their keys are of the old resolved path. Such a
row counts as its clip's row (re-keyed, nothing scored again, no second row), but never for another clip,
instruction, preset or draw."""

from __future__ import annotations

import json
import shutil

from typer.testing import CliRunner

from graph.cli import app
from tests.graph_scripts import square_clips
from tests.test_cli_agent import _scripted
from tools.jsonl import json_lines

runner = CliRunner()
TASK = "push the red block to the right"


def _setup(monkeypatch, tmp_path, n: int = 4) -> tuple:
    """(manifest, out, args): `n` clips in tmp_path/clips, listed with an "id" by a manifest beside the folder."""
    _scripted(monkeypatch, tmp_path)
    (tmp_path / "clips").mkdir()
    square_clips(tmp_path / "clips", n)
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps({"path": f"clips/c{i}.mp4", "instruction": TASK, "id": f"v{i}"}) + "\n"
                                for i in range(n)))
    out = tmp_path / "out.jsonl"
    return manifest, out, ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"]


def _move(tmp_path) -> None:
    """The clips' folder moved to tmp_path/store/clips, a symlink left at its old name."""
    (tmp_path / "store").mkdir()
    shutil.move(str(tmp_path / "clips"), str(tmp_path / "store" / "clips"))
    (tmp_path / "clips").symlink_to(tmp_path / "store" / "clips", target_is_directory=True)


def _manifest_in_clips(monkeypatch, tmp_path) -> tuple:
    """(manifest, out): 2 clips in tmp_path/clips, listed by a manifest in that folder whose third line is bad."""
    _scripted(monkeypatch, tmp_path)
    (tmp_path / "clips").mkdir()
    square_clips(tmp_path / "clips", 2)
    manifest = tmp_path / "clips" / "m.jsonl"
    manifest.write_text("".join(json.dumps({"path": f"c{i}.mp4", "instruction": TASK}) + "\n" for i in range(2))
                        + "{not json\n")
    return manifest, tmp_path / "out.jsonl"


def _rows(out) -> list[dict]:
    return [row for _, row in json_lines(out, ValueError)]


def test_a_moved_clip_folder_left_as_a_link_scores_nothing_again(monkeypatch, tmp_path):
    manifest, out, args = _setup(monkeypatch, tmp_path)
    assert runner.invoke(app, args).exit_code == 0
    before = _rows(out)
    _move(tmp_path)
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "4 already in" in res.output and "0 to score" in res.output, res.output
    assert "warning" not in res.output, res.output
    rows = _rows(out)
    assert len(rows) == 4
    assert [r["result"] for r in rows] == [r["result"] for r in before]  # the results stand
    res = runner.invoke(app, args)  # re-keyed in the file: the next run has nothing to do or say either
    assert res.exit_code == 0 and "4 already in" in res.output and "warning" not in res.output, res.output
    assert len(_rows(out)) == 4


def test_a_row_left_beside_the_new_one_is_warned_about_once_and_not_scored(monkeypatch, tmp_path):
    """The output an earlier version left: each clip scored again under its new key beside its old row."""
    manifest, out, args = _setup(monkeypatch, tmp_path, 2)
    assert runner.invoke(app, args).exit_code == 0
    old = out.read_text()
    _move(tmp_path)
    out.unlink()
    assert runner.invoke(app, args).exit_code == 0  # the new keys' rows
    out.write_text(old + out.read_text())
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "0 to score" in res.output, res.output
    assert res.output.count("warning") == 1 and "2 row(s)" in res.output and "scored twice" in res.output, res.output
    assert len(_rows(out)) == 4  # named, not removed


def test_a_moved_rows_key_is_never_taken_for_another_clip_instruction_preset_or_draw(monkeypatch, tmp_path):
    manifest, out, args = _setup(monkeypatch, tmp_path, 2)
    assert runner.invoke(app, args).exit_code == 0
    _move(tmp_path)
    lines = manifest.read_text().splitlines()
    other = [json.loads(line) for line in lines]
    other[0]["instruction"] = "lift the cup"  # another instruction
    shutil.copy(tmp_path / "store" / "clips" / "c1.mp4", tmp_path / "store" / "clips" / "c9.mp4")
    other[1]["path"] = "clips/c9.mp4"  # another clip (a copy of line 2's: another file) under line 2's id
    manifest.write_text("".join(json.dumps(row) + "\n" for row in other))
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "2 to score" in res.output, res.output
    manifest.write_text("".join(line + "\n" for line in lines))
    for other_run in ([*args[:4], "--preset", "no_wmreward"], [*args, "--draw", "1"]):  # another preset, draw
        res = runner.invoke(app, other_run)
        assert res.exit_code == 0 and "0 already in" in res.output and "2 to score" in res.output, res.output


def test_a_repeat_lines_copy_follows_its_moved_row(monkeypatch, tmp_path):
    """A line repeating line 1's clip and instruction under another id holds a copy of its row ("repeat_of" its key):
    re-keyed with it, written again from it, never scored."""
    manifest, out, args = _setup(monkeypatch, tmp_path, 2)
    manifest.write_text(manifest.read_text() + json.dumps({"path": "clips/c0.mp4", "instruction": TASK, "id": "w"})
                        + "\n")
    assert runner.invoke(app, args).exit_code == 0
    assert len(_rows(out)) == 3
    _move(tmp_path)
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "0 to score" in res.output and "warning" not in res.output, res.output
    rows = _rows(out)
    assert len(rows) == 3 and sorted(r["manifest"]["id"] for r in rows) == ["v0", "v1", "w"]
    copy = next(r for r in rows if r["manifest"]["id"] == "w")
    first = next(r for r in rows if r["manifest"]["id"] == "v0")
    assert copy["repeat_of"] == first["key"] and copy["result"] == first["result"]


def _output(tmp_path, rows: list[dict]):
    from graph.batch import Output

    return Output(tmp_path / "out.jsonl", [json.dumps(r) for r in rows], rows, None, None)


def _linked_clip(tmp_path) -> tuple[dict, str, dict]:
    """A clip new/a.mp4 and a link old -> new: the clip's item (preset full), its name through the link, its stamp."""
    from graph.batch import clip_stamp, item_key

    (tmp_path / "new").mkdir()
    clip = tmp_path / "new" / "a.mp4"
    clip.write_bytes(b"x")
    (tmp_path / "old").symlink_to(tmp_path / "new", target_is_directory=True)
    item = {"key": item_key(str(clip), TASK, "full"), "path": str(clip), "resolved": str(clip), "instruction": TASK,
            "error": None}
    return item, str(tmp_path / "old" / "a.mp4"), clip_stamp(str(clip)) or {}


def test_of_two_old_rows_of_one_clip_the_last_is_taken_and_the_other_named(tmp_path):
    from graph.batch import clip_stamp, item_key
    from graph.batch_moved import moved_rows, moved_warning

    (tmp_path / "new").mkdir()
    clip = tmp_path / "new" / "a.mp4"
    clip.write_bytes(b"x")
    for old in ("old1", "old2"):
        (tmp_path / old).symlink_to(tmp_path / "new", target_is_directory=True)
    item = {"key": item_key(str(clip), TASK, "full"), "path": str(clip), "resolved": str(clip), "instruction": TASK,
            "error": None}

    def row(folder: str, **over) -> dict:
        path = str(tmp_path / folder / "a.mp4")
        return {"key": item_key(path, TASK, "full"), "path": path, "instruction": TASK, "preset": "full",
                "draw": 0, "clip": clip_stamp(str(clip)), "result": {"status": "scored", "reward": float(len(folder))},
                **over}

    rows = [row("old1"), row("old2")]
    moved = moved_rows(_output(tmp_path, rows), [item], "full", 0)
    assert moved.rekeyed == 1 and [r["key"] for r in moved.output.values] == [rows[0]["key"], item["key"]]
    assert json.loads(moved.output.lines[1])["key"] == item["key"]  # what drop_rows writes
    assert moved.left == [rows[0]] and "1 row(s)" in (moved_warning(moved, "out") or "")
    others = [row("old1", instruction="lift"), row("old1", preset="decomposed"), row("old1", draw=1),
              row("old1", draw=True), row("old1", repeat_of="k"), {**row("old1"), "path": str(tmp_path / "b.mp4")}]
    moved = moved_rows(_output(tmp_path, others), [item], "full", 0)
    assert moved.rekeyed == 0 and not moved.left and moved.output.values == others
    true_draw = moved_rows(_output(tmp_path, [row("old1", draw=True)]), [{**item, "key": "k1"}], "full", 1)
    assert true_draw.rekeyed == 0  # a hand-edited `true` is no draw 1
    stamp = clip_stamp(str(clip)) or {}
    unlike = [row("old1", clip={**stamp, "size": stamp["size"] + 1}), row("old2", clip=None)]  # another file; none
    moved = moved_rows(_output(tmp_path, unlike), [item], "full", 0)
    assert moved.rekeyed == 0 and moved.changed == unlike and "2 row(s) whose run" in (moved_warning(moved, "o") or "")
    unstamped = row("old1", clip=None, result={"status": "ineligible", "reward": None})  # nothing of the clip taken
    assert moved_rows(_output(tmp_path, [unstamped]), [item], "full", 0).rekeyed == 1


def test_a_manifest_moved_with_its_clips_keeps_one_row_per_line_bad_lines_too(monkeypatch, tmp_path):
    """The manifest in the moved folder too, run by its old name: its bad line's row (keyed by the manifest's
    resolved path) is replaced, not kept beside a new one."""
    manifest, out = _manifest_in_clips(monkeypatch, tmp_path)
    args = ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"]
    assert runner.invoke(app, args).exit_code == 0
    assert len(_rows(out)) == 3
    _move(tmp_path)
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "0 to score" in res.output and "warning" not in res.output, res.output
    assert len(_rows(out)) == 3


def test_a_link_left_to_other_clips_under_the_same_names_takes_no_row(monkeypatch, tmp_path):
    """The old folder's name made a link to another folder whose clips have the same names but are other files: their
    rows are not taken (the size or modification time their runs recorded is not the clip's), each clip is scored
    again, and the old rows are named once."""
    manifest, out, args = _setup(monkeypatch, tmp_path, 2)
    assert runner.invoke(app, args).exit_code == 0
    (tmp_path / "clips").rename(tmp_path / "v1")
    (tmp_path / "v2").mkdir()
    square_clips(tmp_path / "v2", 3)
    (tmp_path / "v2" / "c0.mp4").replace(tmp_path / "v2" / "c1.mp4")  # another video under c1's name
    (tmp_path / "v2" / "c2.mp4").replace(tmp_path / "v2" / "c0.mp4")
    (tmp_path / "clips").symlink_to(tmp_path / "v2", target_is_directory=True)
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "2 to score" in res.output, res.output
    assert res.output.count("warning") == 1 and "2 row(s) whose run" in res.output, res.output
    assert len(_rows(out)) == 4
