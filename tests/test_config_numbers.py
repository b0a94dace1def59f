"""A number given as a string in a YAML config or prompt is a ConfigError naming the field and the prompt's
row (training/config_io.py's module docstring), as a JSONL prompt row's is; command-line values still convert."""

from __future__ import annotations

from pathlib import Path

import pytest

from training.config import ConfigError
from training.config_io import config_to_dict, load_config
from training.data import prompt_from_row

BASE = "tiny: true\nreward: brightness\n"


def _load(tmp_path: Path, text: str, overrides: list[str] = ()):  # noqa: ANN202
    path = tmp_path / "c.yaml"
    path.write_text(BASE + text)
    return load_config(path, overrides)


@pytest.mark.parametrize(("text", "match"), [
    ("dataset:\n  - {text: push}\n  - {text: pull, image_seed: '3'}\n",
     r"dataset\[1\]\.image_seed: expected an integer, got the string '3'"),
    ("dataset: [{text: push}]\neval_dataset: [{text: pull, image_seed: \"4\"}]\n",
     r"eval_dataset\[0\]\.image_seed: expected an integer, got the string '4'"),
    ("dataset: [{text: push}]\nmax_iterations: '7'\n", r"max_iterations: expected an integer, got the string '7'"),
    ("dataset: [{text: push}]\ntau: '0.5'\n", r"tau: expected a number, got the string '0.5'"),
    ("dataset: [{text: push}]\nkeep_checkpoints: '2'\n", r"keep_checkpoints: expected an integer"),
])
def test_quoted_numbers_in_yaml_are_refused(tmp_path, text, match):
    with pytest.raises(ConfigError, match=match):
        _load(tmp_path, text)


def test_yaml_numbers_and_command_line_text_still_convert(tmp_path):
    cfg = _load(tmp_path, "dataset: [{text: push, image_seed: 3}]\nlearning_rate: 1e-4\nmin_lr_ratio: 2E-1\n",
                ["--max_iterations", "7", "--tau", "0.5", "--keep_checkpoints", "none"])
    assert cfg.dataset[0].image_seed == 3 and cfg.max_iterations == 7 and cfg.tau == 0.5
    assert cfg.learning_rate == 1e-4 and cfg.min_lr_ratio == 0.2  # YAML 1.1 read these two as strings
    assert cfg.keep_checkpoints is None
    with pytest.raises(ConfigError, match=r"dataset\[0\]\.image_seed: expected an integer, got the string '5'"):
        _load(tmp_path, "", ["--dataset", "[{text: push, image_seed: '5'}]"])  # YAML text inside the value


def test_a_saved_config_reads_back(tmp_path):
    import yaml

    cfg = _load(tmp_path, "dataset: [{text: push}]\nlearning_rate: 1e-10\n")
    (tmp_path / "saved.yaml").write_text(yaml.safe_dump(config_to_dict(cfg)))
    assert load_config(tmp_path / "saved.yaml") == cfg


def test_a_jsonl_row_is_refused_the_same_way():
    with pytest.raises(ValueError, match=r"p\.jsonl:4: 'image_seed' must be an integer, got '3'"):
        prompt_from_row({"text": "a", "image_seed": "3"}, "p.jsonl:4", Path("."))
