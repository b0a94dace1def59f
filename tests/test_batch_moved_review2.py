"""Second review of the moved-rows resume (`graph.batch_moved`)."""

from __future__ import annotations

from graph.batch import clip_stamp, item_key
from graph.batch_moved import moved_rows
from tests.test_batch_moved_clips import TASK, _output


def test_rows_under_one_old_key_leading_to_two_clips_now_are_never_rekeyed_to_the_other_clip(tmp_path):
    """Two rows under one old key (outputs concatenated: one naming the clip, one an alias then linked to it) whose
    paths now lead to two clips of this run: neither clip gets the other's reward (c0's scored row is not re-keyed
    to c1's item because c1's ineligible, unstamped row was found under the same old key)."""
    (tmp_path / "new").mkdir()
    c0, c1 = tmp_path / "new" / "c0.mp4", tmp_path / "new" / "c1.mp4"
    c0.write_bytes(b"x")
    c1.write_bytes(b"yy")
    (tmp_path / "old").symlink_to(tmp_path / "new", target_is_directory=True)
    (tmp_path / "alias.mp4").symlink_to(c1)  # pointed to the old c0 at the run before; to c1 now
    items = [{"key": item_key(str(c), TASK, "full"), "path": str(c), "resolved": str(c), "instruction": TASK,
              "error": None} for c in (c0, c1)]
    old = item_key(str(tmp_path / "old" / "c0.mp4"), TASK, "full")
    scored = {"key": old, "path": str(tmp_path / "old" / "c0.mp4"), "instruction": TASK, "preset": "full", "draw": 0,
              "clip": clip_stamp(str(c0)), "result": {"status": "scored", "reward": 0.9}}
    unstamped = {"key": old, "path": str(tmp_path / "alias.mp4"), "instruction": TASK, "preset": "full", "draw": 0,
                 "result": {"status": "ineligible", "reward": None}}
    moved = moved_rows(_output(tmp_path, [scored, unstamped]), items, "full", 0)
    by_key = {}
    for row in moved.output.values:
        by_key.setdefault(row["key"], []).append(row)
    assert all(r["result"].get("reward") is None for r in by_key.get(items[1]["key"], [])), by_key
    assert len(moved.output.values) == 2
    assert moved.rekeyed == 0 and moved.output.values == [scored, unstamped]  # taken for neither: named, both stay
    assert sorted(map(id, moved.left)) == sorted(map(id, [scored, unstamped]))


def test_a_manifest_moved_with_its_clips_repeat_lines_and_two_draws_scores_nothing_and_keeps_every_row(
        monkeypatch, tmp_path):
    """Repeat lines (other ids) follow their moved row at each draw, draw 1 rows are not taken for draw 0 or back, and
    --retry-ineligible finds nothing to do: every row stays, with its result, its copies pointing at their source."""
    import json
    import shutil

    from typer.testing import CliRunner

    from graph.cli import app
    from tests.graph_scripts import square_clips
    from tests.test_batch_moved_clips import _rows
    from tests.test_cli_agent import _scripted

    runner = CliRunner()
    _scripted(monkeypatch, tmp_path)
    (tmp_path / "clips").mkdir()
    square_clips(tmp_path / "clips", 2)
    manifest = tmp_path / "clips" / "m.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in [
        {"path": "c0.mp4", "instruction": TASK, "id": "a"}, {"path": "c1.mp4", "instruction": TASK, "id": "b"},
        {"path": "c0.mp4", "instruction": TASK, "id": "c"}, {"path": "./c0.mp4", "instruction": TASK, "id": "d"}]))
    out = tmp_path / "out.jsonl"
    args = ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"]
    for extra in ([], ["--draw", "1"]):
        res = runner.invoke(app, args + extra)
        assert res.exit_code == 0, res.output
    before = _rows(out)
    (tmp_path / "store").mkdir()
    shutil.move(str(tmp_path / "clips"), str(tmp_path / "store" / "clips"))
    (tmp_path / "clips").symlink_to(tmp_path / "store" / "clips", target_is_directory=True)
    for extra in ([], ["--draw", "1"], [], ["--draw", "1", "--retry-ineligible"]):
        res = runner.invoke(app, args + extra)
        assert res.exit_code == 0 and "0 to score" in res.output and "warning" not in res.output, res.output
    rows = _rows(out)
    assert len(rows) == len(before), (len(before), [(r["key"], r.get("repeat_of"), r["manifest"]) for r in rows])
    keys = {r["key"]: r for r in rows}
    for r in rows:
        if r.get("repeat_of"):
            src = keys[r["repeat_of"]]
            assert src["result"] == r["result"] and src["path"].endswith("c0.mp4") and src.get("draw", 0) == r.get("draw", 0)
    assert sorted((r["manifest"]["id"], r.get("draw", 0), r["result"].get("reward")) for r in rows) == sorted(
        (r["manifest"]["id"], r.get("draw", 0), r["result"].get("reward")) for r in before)


def test_an_unstamped_row_is_not_taken_for_a_clip_missing_now(tmp_path):
    """An old ineligible row recording no clip (an endpoint fault) whose path leads, through the link left, to where the
    item's clip is not (deleted since, never copied): nothing was moved there; the line is scored ("not found", as
    before moved rows were recognised), not left holding the old row's fault for a clip that is not there."""
    (tmp_path / "new").mkdir()
    (tmp_path / "old").symlink_to(tmp_path / "new", target_is_directory=True)
    clip = tmp_path / "new" / "c0.mp4"  # not there
    item = {"key": item_key(str(clip), TASK, "full"), "path": str(clip), "resolved": str(clip), "instruction": TASK,
            "error": None}
    old = str(tmp_path / "old" / "c0.mp4")
    row = {"key": item_key(old + "-then", TASK, "full"), "path": old, "instruction": TASK, "preset": "full",
           "draw": 0, "result": {"status": "ineligible", "reward": None}}
    assert moved_rows(_output(tmp_path, [row]), [item], "full", 0).rekeyed == 0
