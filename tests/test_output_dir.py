"""A fresh launch into an output_dir holding an earlier run (training/run_dir.py): refused unless --resume or
--overwrite_output_dir, which deletes the earlier run's outputs so they never mix with the new run's."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.launches import launch
from tests.test_checkpoints import _fake_checkpoint
from training.config import ConfigError
from training.config_io import load_config
from training.run_dir import (
    EARLIER_OUTPUTS,
    check_output_dir,
    clear_earlier_run,
    earlier_checkpoints,
    prepare_output_dir,
    refusal,
)

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "training" / "configs" / "smoke.yaml"


def _earlier_run(out: Path) -> None:
    """What an earlier, longer run leaves: checkpoints 10 and 9 (latest 10), an export, videos, events, logs."""
    _fake_checkpoint(out / "checkpoints", "iter_000009", ranks=1)
    _fake_checkpoint(out / "checkpoints", "iter_000010", ranks=1)
    for tag in ("iter_000009", "iter_000010"):  # finished saves (training.resume.write_layout)
        (out / "checkpoints" / tag / "layout.json").write_text('{"zero_stage": 0, "dtype": "float32"}\n')
    for name in ("final", "rollout_videos/iter_000010", "eval_videos/iter_000010", "tensorboard"):
        (out / name).mkdir(parents=True, exist_ok=True)
        (out / name / "x").write_text("earlier")
    (out / "metrics.jsonl").write_text('{"iteration": 10}\n')
    (out / "notes.txt").write_text("mine")


def test_earlier_checkpoints_are_finished_saves_and_what_latest_names(tmp_path):
    assert earlier_checkpoints(tmp_path) == []
    ckpt = tmp_path / "checkpoints"
    for tag in ("iter_000010", "iter_000009", "iter_000100_universal", "scratch"):
        (ckpt / tag).mkdir(parents=True)
        (ckpt / tag / "layout.json").write_text("{}")
    (ckpt / "iter_000300").mkdir()  # a save killed part-way: no layout.json, not named by latest
    assert earlier_checkpoints(tmp_path) == ["iter_000009", "iter_000010"]  # by number, only checkpoints
    (ckpt / "latest").write_text("iter_000200\n")  # names a folder that is gone: still an earlier run
    assert earlier_checkpoints(tmp_path) == ["iter_000009", "iter_000010", "iter_000200"]
    (ckpt / "latest").write_text("iter_000300\n")  # what latest names counts without layout.json
    assert earlier_checkpoints(tmp_path) == ["iter_000009", "iter_000010", "iter_000300"]


def test_a_first_save_killed_part_way_can_be_launched_again(tmp_path):
    """Before: its iter_ folder (no latest, no layout.json) refused a fresh launch ("continue that run with
    --resume") while --resume said "no 'latest' file; start the run without --resume"."""
    (tmp_path / "checkpoints" / "iter_000002").mkdir(parents=True)
    (tmp_path / "checkpoints" / "iter_000002" / "mp_rank_00_model_states.pt").write_bytes(b"x")
    check_output_dir(load_config(SMOKE, ["--output_dir", str(tmp_path)]))


def test_a_finished_run_without_checkpoints_is_not_overwritten_silently(tmp_path):
    """Before: a run whose checkpoints/ was deleted was reused: its eval.jsonl deleted, metrics.jsonl
    replaced, and its final/ left beside the new run's."""
    _earlier_run(tmp_path)
    shutil.rmtree(tmp_path / "checkpoints")
    cfg = load_config(SMOKE, ["--output_dir", str(tmp_path)])
    with pytest.raises(ConfigError, match=r"earlier run's outputs \(final/, metrics.jsonl \(1 row\)\) and no "
                       "checkpoint.*--overwrite_output_dir"):
        check_output_dir(cfg)
    shutil.rmtree(tmp_path / "final")
    with pytest.raises(ConfigError, match=r"outputs \(metrics.jsonl \(1 row\)\)"):
        prepare_output_dir(cfg, local_rank=0)
    assert (tmp_path / "metrics.jsonl").read_text() == '{"iteration": 10}\n'
    (tmp_path / "metrics.jsonl").write_text("\n")  # no rows: nothing to lose
    check_output_dir(cfg)
    check_output_dir(load_config(SMOKE, ["--output_dir", str(tmp_path / "new")]))


def test_refusal_names_the_latest_checkpoint_and_both_ways_on(tmp_path):
    cfg = load_config(SMOKE, ["--output_dir", str(tmp_path)])
    assert refusal(cfg, []) is None
    text = refusal(cfg, ["iter_000009", "iter_000010"])
    assert text is not None and "(2 checkpoints, the latest iter_000010)" in text
    assert "--resume" in text and "--overwrite_output_dir" in text and str(tmp_path) in text
    assert refusal(load_config(SMOKE, ["--output_dir", str(tmp_path), "--resume"]), ["iter_000010"]) is None
    assert refusal(load_config(SMOKE, ["--overwrite_output_dir"]), ["iter_000010"]) is None
    with pytest.raises(ConfigError, match="resume continues the run in output_dir and overwrite_output_dir"):
        load_config(SMOKE, ["--resume", "--overwrite_output_dir"])


def test_overwrite_deletes_the_earlier_runs_outputs_and_nothing_else(tmp_path):
    out = tmp_path / "run"
    _earlier_run(out)
    with pytest.raises(ConfigError, match="already holds an earlier run's checkpoints"):
        prepare_output_dir(load_config(SMOKE, ["--output_dir", str(out)]), local_rank=0)
    assert (out / "checkpoints" / "iter_000010").is_dir()  # refused: nothing deleted
    cfg = load_config(SMOKE, ["--output_dir", str(out), "--overwrite_output_dir"])
    assert prepare_output_dir(cfg, local_rank=1) == [] and (out / "checkpoints").is_dir()  # not this node's job
    assert prepare_output_dir(cfg, local_rank=0) == list(EARLIER_OUTPUTS)
    assert sorted(p.name for p in out.iterdir()) == ["metrics.jsonl", "notes.txt"]
    assert clear_earlier_run(out) == []
    (out / "metrics.jsonl").unlink()  # the overwriting run restarts its logs (training.metrics_log.MetricsLog)
    check_output_dir(load_config(SMOKE, ["--output_dir", str(out)]))  # nothing left to refuse


def test_a_folder_without_run_outputs_is_reused_and_a_resume_is_not_checked_here(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("")  # stopped before its first iteration
    (tmp_path / "notes.txt").write_text("mine")
    assert prepare_output_dir(load_config(SMOKE, ["--output_dir", str(tmp_path)]), local_rank=0) == []
    _earlier_run(tmp_path)
    assert prepare_output_dir(load_config(SMOKE, ["--output_dir", str(tmp_path), "--resume"]), local_rank=0) == []
    assert (tmp_path / "checkpoints" / "iter_000010").is_dir()


def test_check_reports_the_refusal_and_deletes_nothing(tmp_path, capsys, monkeypatch):
    from training.train import main

    monkeypatch.setenv("WORLD_SIZE", "1")
    out = tmp_path / "run"
    _earlier_run(out)
    assert main(["--config", str(SMOKE), "--output_dir", str(out), "--check"]) == 2
    assert "already holds an earlier run's checkpoints (2 checkpoints, the latest iter_000010)" in capsys.readouterr().err
    assert main(["--config", str(SMOKE), "--output_dir", str(out), "--overwrite_output_dir", "--check"]) == 0
    assert (out / "checkpoints" / "iter_000010").is_dir() and (out / "final" / "x").is_file()


def _launch(out: Path, *extra: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "training.train", "--config", str(SMOKE), "--output_dir", str(out), "--progress",
           "false", "--tensorboard", "false", "--export", "none", *extra]
    return launch(cmd, timeout=timeout, what="training")


def test_a_fresh_launch_into_an_earlier_run_stops_before_the_model_loads(tmp_path):
    out = tmp_path / "run"
    _earlier_run(out)
    proc = _launch(out, timeout=300)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "error: output_dir" in proc.stderr and "--overwrite_output_dir" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert (out / "metrics.jsonl").read_text() == '{"iteration": 10}\n'  # the earlier run's logs untouched
    assert not (out / "config.yaml").exists()


@pytest.mark.slow
def test_an_overwriting_run_keeps_its_own_checkpoints_not_the_earlier_runs(tmp_path):
    """Before: the earlier run's iter_000009/10 outranked the new run's in keep_checkpoints' pruning, which
    deleted the new run's iter_000001 and kept the stale ones beside iter_000002."""
    out = tmp_path / "run"
    _earlier_run(out)
    proc = _launch(out, "--overwrite_output_dir", "--max_iterations", "2", "--checkpoint_every", "1",
                   "--keep_checkpoints", "1")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "deleted the earlier run's checkpoints, final, rollout_videos, eval_videos, tensorboard" in proc.stdout
    ckpt = out / "checkpoints"
    assert sorted(p.name for p in ckpt.iterdir() if p.is_dir()) == ["iter_000002"]
    assert (ckpt / "latest").read_text().strip() == "iter_000002"
    assert [json.loads(line)["iteration"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    assert (out / "notes.txt").read_text() == "mine" and not (out / "final").exists()


def test_the_launcher_hides_only_deepspeeds_all_gather_deprecation():
    import warnings

    from training.train import _quiet_dependency_warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _quiet_dependency_warnings()
        warnings.warn("`torch.distributed.all_gather_into_tensor` is deprecated. Please use "
                      "`torch.distributed.all_gather_single` instead.", FutureWarning, stacklevel=1)
        warnings.warn("`torch.distributed.something_else` is deprecated.", FutureWarning, stacklevel=1)
        warnings.warn("`torch.distributed.all_gather_into_tensor` is deprecated.", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["`torch.distributed.something_else` is deprecated.",
                                             "`torch.distributed.all_gather_into_tensor` is deprecated."]


def test_overwrite_deletes_the_earlier_runs_tag_exports_too(tmp_path):
    """Before: `python -m training.export --tag` folders (export-iter_NNNNNN) survived --overwrite_output_dir and
    sat beside the new run's, under the names its own exports of those tags take; and an output_dir holding
    only such an export was reused without a word."""
    out = tmp_path / "run"
    _earlier_run(out)
    for name in ("export-iter_000009", "export-iter_000010"):
        (out / name).mkdir()
        (out / name / "export.json").write_text("{}")
    (out / "export-mine").mkdir()  # not an export (no export.json): the user's, left alone
    cfg = load_config(SMOKE, ["--output_dir", str(out), "--overwrite_output_dir"])
    assert prepare_output_dir(cfg, local_rank=0) == [*EARLIER_OUTPUTS, "export-iter_000009", "export-iter_000010"]
    assert sorted(p.name for p in out.iterdir()) == ["export-mine", "metrics.jsonl", "notes.txt"]
    (out / "metrics.jsonl").unlink()
    (out / "export-iter_000010").mkdir()
    (out / "export-iter_000010" / "export.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"earlier run's outputs \(export-iter_000010/\)"):
        check_output_dir(load_config(SMOKE, ["--output_dir", str(out)]))


@pytest.mark.parametrize("resume", [False, True])
@pytest.mark.parametrize("below", [False, True])
def test_an_output_dir_that_is_a_file_stops_the_launch_check(tmp_path, resume, below):
    """--check said ok and the launch loaded the model, then failed with FileExistsError (NotADirectoryError for a
    folder under a file) in a traceback when the metrics log made the folder."""
    (tmp_path / "notes.txt").write_text("mine")
    out = tmp_path / "notes.txt" / "run" if below else tmp_path / "notes.txt"
    cfg = load_config(SMOKE, ["--output_dir", str(out)] + (["--resume"] if resume else []))
    with pytest.raises(ConfigError, match=rf"output_dir {out} cannot be a folder: {tmp_path / 'notes.txt'} is a file"):
        check_output_dir(cfg)
    assert (tmp_path / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("make, why", [
    (lambda p: p.write_bytes(b'{"iteration": 10, "note": "caf\xe9"}\n'),
     r": not UTF-8 text \(byte 0xe9 at line 1 column 31\): save the file as UTF-8")], ids=["not_utf8"])
def test_a_metrics_log_that_cannot_be_read_is_named_not_taken_for_no_rows(tmp_path, make, why):
    """metrics.jsonl was counted with ``read_text()``: a file that is not UTF-8 (or cannot be read) counted no rows,
    so a fresh launch went on and replaced it. Now the launch is refused naming the file and why, as the repo's JSON
    readers name such a file (`tools.jsonl.json_text`); --resume and --overwrite_output_dir do not read it."""
    make(tmp_path / "metrics.jsonl")
    cfg = load_config(SMOKE, ["--output_dir", str(tmp_path)])
    with pytest.raises(ConfigError, match=rf"{tmp_path / 'metrics.jsonl'}{why}.*--overwrite_output_dir"):
        check_output_dir(cfg)
    check_output_dir(load_config(SMOKE, ["--output_dir", str(tmp_path), "--overwrite_output_dir"]))
    check_output_dir(load_config(SMOKE, ["--output_dir", str(tmp_path), "--resume"]))


def test_checkpoints_beside_an_unreadable_metrics_log_are_what_the_refusal_names(tmp_path):
    """An earlier run's checkpoints and a metrics.jsonl that is not UTF-8: the refusal named only the log and offered
    --overwrite_output_dir (which deletes the checkpoints) or another output_dir, not --resume. The checkpoints'
    refusal does not depend on the log (it names no other output), which is not read there."""
    _earlier_run(tmp_path)
    (tmp_path / "metrics.jsonl").write_bytes(b'{"iteration": 10, "note": "caf\xe9"}\n')
    cfg = load_config(SMOKE, ["--output_dir", str(tmp_path)])
    with pytest.raises(ConfigError, match=r"already holds an earlier run's checkpoints \(2 checkpoints.*--resume"):
        check_output_dir(cfg)
