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
