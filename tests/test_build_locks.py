"""A torch extension build lock left by an interrupted DeepSpeed op build made every later CPU launch hang at
process-group start without a word; --check and the launch now name it and say how to remove it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from training.build_locks import STALE_AFTER_S, extensions_root, stale_lock_note, stale_locks

SMOKE = str(Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml")


def _lock(root: Path, name: str, age_s: float, now: float) -> Path:
    lock = root / name / "lock"
    lock.parent.mkdir(parents=True)
    lock.touch()
    os.utime(lock, (now - age_s, now - age_s))
    return lock


def test_only_old_build_locks_are_stale(tmp_path):
    now = 1_000_000.0
    old = _lock(tmp_path, "deepspeed_shm_comm", STALE_AFTER_S + 60, now)
    _lock(tmp_path, "fresh_build", 60, now)  # a build running now
    (tmp_path / "built_ext").mkdir()  # a finished build: no lock
    assert stale_locks(tmp_path, now) == [(old, pytest.approx(STALE_AFTER_S + 60))]
    assert stale_locks(tmp_path / "missing", now) == []
    note = stale_lock_note(stale_locks(tmp_path, now))
    assert note is not None and "31 min old" in note and f"rm {old}" in note and "waits forever" in note
    assert stale_lock_note([]) is None
    assert "2 h 5 min old" in stale_lock_note([(old, 2 * 3600 + 5 * 60 + 30)])


def test_the_extensions_root_is_torchs(tmp_path, monkeypatch):
    from torch.utils.cpp_extension import _get_build_directory  # the private function torch builds with

    assert extensions_root({"TORCH_EXTENSIONS_DIR": str(tmp_path / "mine")}) == tmp_path / "mine"
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # torch's user cache folder, kept in tmp_path
    built = Path(_get_build_directory("some_op", False))
    assert built.parent == extensions_root(os.environ) and built.is_relative_to(tmp_path)


@pytest.mark.parametrize("check", [True, False])
def test_check_and_launch_name_a_stale_build_lock(tmp_path, capsys, monkeypatch, check, followed_launchers):
    import training.trainer
    from training.train import main

    for var in ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "LOCAL_SIZE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("RANK", "0")  # as a launcher sets them (undone after the test; a plain run would set its own)
    monkeypatch.setenv("WORLD_SIZE", "1")
    root = tmp_path / "ext"
    lock = _lock(root, "deepspeed_shm_comm", STALE_AFTER_S + 120, time.time())
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(root))
    monkeypatch.setattr(training.trainer, "train", lambda *_a, **_k: tmp_path / "run")
    args = ["--config", SMOKE, "--output_dir", str(tmp_path / "run")] + (["--check"] if check else [])
    assert main(args) == 0
    out = capsys.readouterr()
    said = out.out if check else out.err
    assert f"rm {lock}" in said and "interrupted build" in said
    lock.unlink()
    assert main(args) == 0
    again = capsys.readouterr()
    assert "interrupted build" not in again.out + again.err
    assert followed_launchers == ([] if check else [os.getppid()] * 2)  # --check follows no launcher
