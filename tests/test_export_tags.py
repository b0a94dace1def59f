"""``python -m training.export --tag latest``: the checkpoint the run's ``latest`` file names, exported under its own
tag, like ``--tag best`` (training/export_tags.py)."""

from __future__ import annotations

from pathlib import Path

import training.export as export
from tests.checkpoint_runs import saved_run


def _calls(monkeypatch) -> list[dict]:
    calls: list[dict] = []

    def fake(cfg, out, *, checkpoint_dir=None, tag=None):  # noqa: ANN001, ANN202
        calls.append({"out": Path(out), "tag": tag, "checkpoint_dir": Path(checkpoint_dir)})
        return Path(out)

    monkeypatch.setattr(export, "export_policy", fake)
    return calls


def test_tag_latest_exports_the_checkpoint_latest_names_under_its_tag(tmp_path, monkeypatch, capsys):
    """``--tag latest`` was read as a folder named ``latest`` (the file DeepSpeed writes): "no checkpoint 'latest'
    in ...; saved: iter_000003" for the checkpoint it names."""
    _, ckpt = saved_run(tmp_path)
    calls = _calls(monkeypatch)
    assert export.main(["--run", str(tmp_path / "run"), "--tag", "latest"]) == 0
    assert calls == [{"out": tmp_path / "run" / "export-iter_000003", "tag": "iter_000003", "checkpoint_dir": ckpt}]
    assert "latest checkpoint: iter_000003" in capsys.readouterr().out


def test_tag_latest_without_a_latest_file_is_a_clear_error(tmp_path, monkeypatch, capsys):
    _, ckpt = saved_run(tmp_path)
    (ckpt / "latest").unlink()
    calls = _calls(monkeypatch)
    assert export.main(["--run", str(tmp_path / "run"), "--tag", "latest"]) == 2
    err = capsys.readouterr().err
    assert calls == [] and "--tag latest" in err and "no 'latest' file" in err and "iter_000003" in err


def test_without_a_tag_the_latest_still_goes_to_final(tmp_path, monkeypatch):
    """The alias changes nothing for the default: no --tag exports what ``latest`` names into final/."""
    _saved, ckpt = saved_run(tmp_path)
    calls = _calls(monkeypatch)
    assert export.main(["--run", str(tmp_path / "run")]) == 0
    assert calls == [{"out": tmp_path / "run" / "final", "tag": None, "checkpoint_dir": ckpt}]


def test_the_command_line_reports_a_tag_error_without_a_traceback(tmp_path):
    """Run as `python -m training.export`, the module is `__main__`: its `except ExportError` caught
    `__main__.ExportError`, while training/export_tags.py raises `training.export.ExportError`, a class of the
    module imported a second time. `--tag best` of a run without held-out evaluation (the smoke run) and
    `--tag latest` without a `latest` file ended in a traceback instead of one error line and exit 2."""
    import os
    import subprocess
    import sys

    _, ckpt = saved_run(tmp_path)
    (ckpt / "latest").unlink()
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    for tag, says in (("latest", "no 'latest' file"), ("best", "eval.jsonl does not exist")):
        done = subprocess.run([sys.executable, "-m", "training.export", "--run", str(tmp_path / "run"), "--tag", tag],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, done.stderr
        assert f"error: --tag {tag}" in done.stderr and says in done.stderr and "Traceback" not in done.stderr
