"""Edges of the training command line: a field whose value is missing must not take the next option as its value
(with ``OUT`` unset, ``--output_dir $OUT --resume`` became ``output_dir="--resume"`` and no resume, a fresh run
into a folder named ``--resume``: the README's requeue snippet passes ``--output_dir $OUT $R``), and a setting
the machine cannot run is a config error before the model loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from training.config import ConfigError
from training.config_io import apply_overrides, parse_cli

BASE = ["--tiny", "--reward", "brightness", "--dataset", "[{text: push}]"]


@pytest.mark.parametrize("following", ["--resume", "--max_iterations", "--max-iterations", "--check",
                                       "--local_rank=0", "--config"])
def test_an_option_in_place_of_a_value_is_refused(following):
    with pytest.raises(ConfigError, match=rf"--output_dir needs a value, got the option {following.split('=')[0]}"):
        apply_overrides({}, ["--output_dir", following, "3"])


def test_values_that_only_look_like_options_are_kept():
    cfg = parse_cli([*BASE, "--negative_prompt", "--blurry", "--seed", "7"])
    assert cfg.negative_prompt == "--blurry" and cfg.seed == 7  # no option of that name: a value
    assert parse_cli([*BASE, "--negative_prompt=--resume"]).negative_prompt == "--resume"  # = says it is one
    assert parse_cli([*BASE, "--output_dir", "runs/x", "--resume", "--overwrite_output_dir", "false"]).resume


def test_config_followed_by_an_option_is_refused():
    with pytest.raises(ConfigError, match="--config needs a file path"):
        parse_cli(["--config", "--tiny", *BASE])


def test_device_cuda_without_a_cuda_device_is_a_config_error(tmp_path, capsys, monkeypatch):
    """The launch stopped in torch.cuda.set_device with a traceback on every rank (the GPU recipes set device: cuda;
    training.generate already refuses it by name); `--check`, which may run on a login node, notes it."""
    import torch

    from training.train import main

    smoke = str(Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    args = ["--config", smoke, "--output_dir", str(tmp_path / "run"), "--device", "cuda"]
    assert main([*args, "--check"]) == 0
    assert "\nnote: device is cuda, but torch sees no CUDA device here" in capsys.readouterr().out
    assert main(args) == 2 and not (tmp_path / "run").exists()
    assert "error: device is cuda, but torch sees no CUDA device here" in capsys.readouterr().err
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert main([*args, "--check"]) == 0 and "note: device" not in capsys.readouterr().out


def test_a_resume_already_at_max_iterations_says_it_trains_nothing(tmp_path, capsys, monkeypatch):
    """A resume whose checkpoint is at or past max_iterations (which counts the iterations before the resume: a
    user asking for 2 more gave --max_iterations 2) trained nothing, exported the checkpoint again and said only
    "done"; --check said nothing either."""
    from tests.test_checkpoints import _fake_checkpoint
    from training.resume import StateLayout, nothing_to_train, write_layout
    from training.train import main

    assert nothing_to_train("iter_000004", 5) is None and nothing_to_train("iter_000004_universal", 9) is None
    assert nothing_to_train("custom", 1) is None  # not an iteration tag: nothing known
    note = nothing_to_train("iter_000004_universal", 4)
    assert note is not None and "iteration 4" in note and "max_iterations 4" in note and "--max_iterations 8 for 4 more" in note
    smoke = str(Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml")
    out = tmp_path / "run"
    _fake_checkpoint(out / "checkpoints", "iter_000004", ranks=1)
    write_layout(out / "checkpoints" / "iter_000004", StateLayout(2, "float32"))
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    args = ["--config", smoke, "--output_dir", str(out), "--resume", "--check"]
    assert main([*args, "--max_iterations", "2"]) == 0
    assert "nothing is trained" in capsys.readouterr().out
    assert main([*args, "--max_iterations", "5"]) == 0
    assert "nothing is trained" not in capsys.readouterr().out
