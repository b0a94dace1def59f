"""``python -m training.reshard --tag``: only a finished checkpoint of the run's own folder is converted."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from training.reshard import ReshardError, main, reshard


def _save(folder: Path, *, finished: bool) -> None:
    folder.mkdir(parents=True)
    (folder / "mp_rank_00_model_states.pt").write_bytes(b"x")
    (folder / "zero_pp_rank_0_mp_rank_00_optim_states.pt").write_bytes(b"x")
    if finished:
        (folder / "layout.json").write_text("{}")


def _converter(monkeypatch) -> list[list[str]]:
    """DeepSpeed's converter, succeeding on whatever it is given (it does not check that a save finished)."""
    calls: list[list[str]] = []

    def run(cmd, **_kw):  # noqa: ANN001, ANN202
        calls.append(cmd)
        out = Path(cmd[cmd.index("--output_folder") + 1])
        (out / "zero").mkdir(parents=True)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", run)
    return calls


def test_a_save_killed_part_way_is_not_converted(tmp_path, monkeypatch):
    """iter_000004 has no layout.json and latest still names iter_000002: its files may be cut short. The export
    refused it (training.run_dir.unfinished_save, "cannot be exported or converted"), the conversion merged it."""
    ckpt = tmp_path / "checkpoints"
    _save(ckpt / "iter_000002", finished=True)
    _save(ckpt / "iter_000004", finished=False)
    (ckpt / "latest").write_text("iter_000002")
    calls = _converter(monkeypatch)
    with pytest.raises(ReshardError, match="killed part-way"):
        reshard(ckpt, "iter_000004")
    assert calls == [] and not (ckpt / "iter_000004_universal").exists()
    assert reshard(ckpt) == ckpt / "iter_000002_universal"  # the finished one still converts


@pytest.mark.parametrize("tag", ["..", "../elsewhere", "/abs/iter_000002", ""])
def test_a_tag_that_is_no_folder_name_is_a_clear_error(tmp_path, monkeypatch, capsys, tag):
    """An absolute --tag replaced the checkpoint folder (Path / "/abs" is "/abs") and wrote the conversion beside it,
    outside the run; an empty one was taken as no tag."""
    ckpt = tmp_path / "run" / "checkpoints"
    _save(ckpt / "iter_000002", finished=True)
    (ckpt / "latest").write_text("iter_000002")
    elsewhere = tmp_path / "run" / "elsewhere"
    _save(elsewhere, finished=True)
    calls = _converter(monkeypatch)
    assert main(["--run", str(tmp_path / "run"), "--tag", tag]) == 2
    assert "is not a checkpoint tag" in capsys.readouterr().err and calls == []
