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
    """`--check` said ok and the launch stopped in torch.cuda.set_device with a traceback on every rank (the GPU
    recipes set device: cuda; training.generate already refuses it by name)."""
    import torch

    from training.train import main

    smoke = str(Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    args = ["--config", smoke, "--output_dir", str(tmp_path / "run"), "--device", "cuda"]
    assert main([*args, "--check"]) == 2
    assert "device is cuda, but torch sees no CUDA device" in capsys.readouterr().err
    assert main(args) == 2 and not (tmp_path / "run").exists()
