"""Review of the moved-rows resume (`graph.batch_moved`): cases its first tests left out."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from graph.cli import app
from tests.graph_scripts import square_clips
from tests.test_batch_moved_clips import TASK, _rows
from tests.test_cli_agent import _scripted

runner = CliRunner()


def test_a_clip_not_found_until_a_link_was_made_is_scored_not_taken_as_not_found(monkeypatch, tmp_path):
    """The manifest named clips/ before it existed (each row "video not found", no size recorded: no file); a link
    made at that name to the clips since: the clips are scored, as before moved rows were recognised, not left "not
    found" under their new key."""
    _scripted(monkeypatch, tmp_path)
    (tmp_path / "store").mkdir()
    square_clips(tmp_path / "store", 2)
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps({"path": f"clips/c{i}.mp4", "instruction": TASK}) + "\n"
                                for i in range(2)))
    out = tmp_path / "out.jsonl"
    args = ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"]
    assert runner.invoke(app, args).exit_code == 0
    assert all(r["result"]["status"] == "ineligible" and "clip" not in r for r in _rows(out))
    (tmp_path / "clips").symlink_to(tmp_path / "store", target_is_directory=True)
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "2 to score" in res.output, res.output


def test_rows_of_other_manifests_are_not_resolved_on_a_resume(monkeypatch, tmp_path):
    """An output shared with another manifest (other instructions): the moved-row search resolves none of the other
    manifest's row paths (one readlink per row, every resume, on a slow mount), since no item could match them."""
    from graph import batch_moved
    from graph.batch import item_key
    from tests.test_batch_moved_clips import _output

    asked: list[str] = []

    def counting():
        def identity(path):
            asked.append(path)
            return str(path)
        return identity

    monkeypatch.setattr(batch_moved, "path_identities", counting)
    clip = str(tmp_path / "a.mp4")
    item = {"key": item_key(clip, TASK, "full"), "path": clip, "resolved": clip, "instruction": TASK, "error": None}
    others = [{"key": item_key(str(tmp_path / f"b{i}.mp4"), f"task {i}", "full"), "path": str(tmp_path / f"b{i}.mp4"),
               "instruction": f"task {i}", "preset": "full", "draw": 0, "result": {"status": "scored"}}
              for i in range(5)]
    moved = batch_moved.moved_rows(_output(tmp_path, others), [item], "full", 0)
    assert moved.rekeyed == 0 and moved.output.values == others
    assert asked == []


def test_only_the_rows_found_of_the_very_clip_are_re_keyed_not_others_under_their_key(tmp_path):
    """Two rows under one old key, the last recording another size (another file then under that name): only the row of
    the clip as it is now is re-keyed; re-keyed too, the other came last under the item's key and its result counted
    (a reward of another file)."""
    from graph.batch import item_key, kept_rows
    from graph.batch_moved import moved_rows
    from tests.test_batch_moved_clips import _linked_clip, _output

    item, path, stamp = _linked_clip(tmp_path)
    same = {"key": item_key(path, TASK, "full"), "path": path, "instruction": TASK, "preset": "full", "draw": 0,
            "clip": stamp, "result": {"status": "scored", "reward": 0.9}}
    other = {**same, "clip": {**stamp, "size": stamp["size"] + 7}, "result": {"status": "scored", "reward": 0.1}}
    moved = moved_rows(_output(tmp_path, [same, other]), [item], "full", 0)
    assert moved.rekeyed == 1 and moved.changed == [other]
    assert kept_rows(moved.output)[item["key"]]["result"]["reward"] == 0.9
    assert [r["key"] for r in moved.output.values] == [item["key"], same["key"]]  # the other stays, named
