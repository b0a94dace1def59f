"""keep_checkpoints with a save killed part-way (no layout.json): it neither counts nor is deleted, so the
newest finished checkpoints stay (training/engine.py, training.run_dir.unfinished_checkpoints)."""

from __future__ import annotations

from pathlib import Path

from training.engine import prune, stale_checkpoints
from training.run_dir import LAYOUT_FILE, unfinished_checkpoints


def _folder(ckpt: Path, tag: str, finished: bool) -> None:
    (ckpt / tag).mkdir(parents=True)
    (ckpt / tag / "mp_rank_00_model_states.pt").write_bytes(b"x")
    if finished:
        (ckpt / tag / LAYOUT_FILE).write_text("{}")


def test_an_unfinished_save_does_not_take_a_finished_checkpoints_place(tmp_path):
    for tag, done in (("iter_000010", True), ("iter_000020", True), ("iter_000025", True), ("iter_000030", False)):
        _folder(tmp_path, tag, done)
    (tmp_path / "latest").write_text("iter_000025")  # resumed from 20 after the save of 30 was killed
    assert unfinished_checkpoints(tmp_path, "iter_000025") == ["iter_000030"]
    assert prune(tmp_path, 2, local_rank=0) == ["iter_000010"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["iter_000020", "iter_000025", "iter_000030", "latest"]
    assert prune(tmp_path, 1, local_rank=0) == ["iter_000020"]  # the newest finished one stays


def test_an_unfinished_save_between_finished_ones(tmp_path):
    for tag, done in (("iter_000030", True), ("iter_000040", False), ("iter_000050", True)):
        _folder(tmp_path, tag, done)
    (tmp_path / "latest").write_text("iter_000050")
    assert prune(tmp_path, 2, local_rank=0) == []
    assert stale_checkpoints(["iter_000030", "iter_000040", "iter_000050"], "iter_000050", 2) == ["iter_000030"]


def test_folders_from_before_layout_json_still_count(tmp_path):
    for tag, done in (("iter_000001", False), ("iter_000002", False), ("iter_000003", True)):
        _folder(tmp_path, tag, done)  # 1 and 2: written before the file existed, not unfinished
    (tmp_path / "latest").write_text("iter_000003")
    assert unfinished_checkpoints(tmp_path, "iter_000003") == []
    assert prune(tmp_path, 2, local_rank=0) == ["iter_000001"]
    assert unfinished_checkpoints(tmp_path / "missing", None) == []


def test_checkpoints_past_latest_after_going_back_do_not_take_the_new_ones_places(tmp_path):
    """Resumed from iter_10 (latest pointed back at it, as the refusals suggest) while the abandoned attempt's
    finished iter_20 and iter_30 stay: they counted as the newest two, so keep_checkpoints 2 deleted the
    checkpoint the run resumed from at its first save, and every later save the one before it."""
    for tag in ("iter_000010", "iter_000020", "iter_000030", "iter_000011"):
        _folder(tmp_path, tag, True)
    (tmp_path / "latest").write_text("iter_000011")
    assert prune(tmp_path, 2, local_rank=0) == []
    _folder(tmp_path, "iter_000012", True)
    (tmp_path / "latest").write_text("iter_000012")
    assert prune(tmp_path, 2, local_rank=0) == ["iter_000010"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["iter_000011", "iter_000012", "iter_000020",
                                                          "iter_000030", "latest"]
