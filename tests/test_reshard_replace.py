"""`reshard --force` replacing an existing conversion: a failure never leaves a folder that looks complete
(holds ``zero/``) but is a half-deleted old conversion, or a mix of old and new."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from training.reshard import ReshardError, reshard


def _checkpoint(ckpt: Path) -> Path:
    (ckpt / "iter_000002").mkdir(parents=True)
    (ckpt / "iter_000002" / "mp_rank_00_model_states.pt").write_bytes(b"x")
    for r in range(2):
        (ckpt / "iter_000002" / f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt").write_bytes(b"x")
    (ckpt / "latest").write_text("iter_000002")
    old = ckpt / "iter_000002_universal"
    (old / "zero" / "layer").mkdir(parents=True)
    (old / "zero" / "layer" / "fp32.pt").write_bytes(b"old")
    (old / "mp_rank_00_model_states.pt").write_bytes(b"old")
    return old


def _fake_converter(monkeypatch):
    """DeepSpeed's converter, succeeding: writes a new conversion into --output_folder."""
    def run(cmd, **_kw):
        out = Path(cmd[cmd.index("--output_folder") + 1])
        (out / "zero" / "layer").mkdir(parents=True)
        (out / "zero" / "layer" / "fp32.pt").write_bytes(b"new")
        (out / "mp_rank_00_model_states.pt").write_bytes(b"new")
        return subprocess.CompletedProcess(cmd, 0, "", "")
    monkeypatch.setattr(subprocess, "run", run)


def test_a_half_failed_delete_of_the_old_conversion_leaves_the_new_one_in_place(tmp_path, monkeypatch):
    ckpt = tmp_path / "checkpoints"
    old = _checkpoint(ckpt)
    _fake_converter(monkeypatch)
    real_rmtree = shutil.rmtree

    def half_rmtree(path, ignore_errors=False, **kw):  # removes one file of an old conversion, then "fails"
        path = Path(path)
        if (path / "mp_rank_00_model_states.pt").exists() and (path / "zero").is_dir():
            (path / "mp_rank_00_model_states.pt").unlink()
            if not ignore_errors:
                raise PermissionError(f"cannot remove {path / 'zero'}")
            return
        real_rmtree(path, ignore_errors=ignore_errors, **kw)

    monkeypatch.setattr(shutil, "rmtree", half_rmtree)
    assert reshard(ckpt, force=True) == old
    assert (old / "zero" / "layer" / "fp32.pt").read_bytes() == b"new"
    assert (old / "mp_rank_00_model_states.pt").read_bytes() == b"new"
    assert not (ckpt / "iter_000002_universal.partial").exists()


def _fail_renames(monkeypatch, errors: dict[str, str]) -> None:
    """`Path.rename` raises OSError(errors[suffix]) for a source whose name ends with one of `errors`' suffixes."""
    real_rename = Path.rename

    def rename(self, target):
        for suffix, message in errors.items():
            if self.name.endswith(suffix):
                raise OSError(message)
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", rename)

def test_a_failed_move_into_place_keeps_the_old_conversion_whole(tmp_path, monkeypatch):
    ckpt = tmp_path / "checkpoints"
    old = _checkpoint(ckpt)
    _fake_converter(monkeypatch)
    _fail_renames(monkeypatch, {".partial": "disk went away"})
    with pytest.raises(ReshardError, match="disk went away"):
        reshard(ckpt, force=True)
    assert (old / "zero" / "layer" / "fp32.pt").read_bytes() == b"old"
    assert (old / "mp_rank_00_model_states.pt").read_bytes() == b"old"
    assert not (ckpt / "iter_000002_universal.partial").exists()


def test_a_failed_move_and_a_failed_restore_name_both_paths_and_the_state_left(tmp_path, monkeypatch):
    """Before: when the new conversion could not be moved in and the old one could not be moved back either, the
    restore's raw OSError escaped (no ReshardError, so ``main`` crashed with a traceback) without saying that
    ``--resume`` now finds no conversion and the old one sits under a hidden name; the new one was deleted."""
    ckpt = tmp_path / "checkpoints"
    old = _checkpoint(ckpt)
    _fake_converter(monkeypatch)
    _fail_renames(monkeypatch, {".partial": "disk went away", ".replaced": "still away"})
    with pytest.raises(ReshardError) as info:
        reshard(ckpt, force=True)
    aside, partial = ckpt / ".iter_000002_universal.replaced", ckpt / "iter_000002_universal.partial"
    message = str(info.value)
    assert str(aside) in message and str(old) in message and str(partial) in message
    assert "disk went away" in message and "still away" in message
    assert not old.exists()
    assert (aside / "zero" / "layer" / "fp32.pt").read_bytes() == b"old"  # the old conversion, whole
    assert (partial / "zero" / "layer" / "fp32.pt").read_bytes() == b"new"  # the new one, kept


def test_main_reports_a_double_failure_as_an_error_not_a_traceback(tmp_path, monkeypatch, capsys):
    from training.reshard import main

    ckpt = tmp_path / "run" / "checkpoints"
    _checkpoint(ckpt)
    _fake_converter(monkeypatch)
    _fail_renames(monkeypatch, {".partial": "read-only file system", ".replaced": "read-only file system"})
    assert main(["--run", str(tmp_path / "run"), "--force"]) == 2
    assert "no conversion at" in capsys.readouterr().err
