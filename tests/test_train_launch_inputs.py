"""Launch inputs that used to mean different things in different places: an empty prompt-file setting, a
frame rate the video writer cannot store, and rank variables of the environment that are not numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from training.config import ConfigError, PromptSpec, TrainConfig
from training.config_checks import validate
from training.config_io import load_config

CONFIGS = Path(__file__).resolve().parents[1] / "training" / "configs"
SMOKE = str(CONFIGS / "smoke.yaml")


def _ok(**kw) -> TrainConfig:
    base = dict(tiny=True, reward="brightness", dataset=[PromptSpec(text="push the block")])
    base.update(kw)
    return TrainConfig(**base)


@pytest.mark.parametrize("value", ["", "   "])
@pytest.mark.parametrize("name", ["dataset_file", "eval_dataset_file"])
def test_an_empty_prompt_file_setting_is_a_config_error(name, value):
    """Validation took "" as unset (the inline prompts were enough) while the loader took it as the path ".",
    failing later with "prompt file not found: ."; now both say the setting is empty."""
    with pytest.raises(ConfigError, match=rf"{name} is empty \(an unset shell variable\?\)"):
        validate(_ok(**{name: value}))
    with pytest.raises(ConfigError, match=rf"{name} is empty"):
        load_config(SMOKE, [f"--{name}", value])


def test_the_loader_refuses_an_empty_prompt_file_path_too():
    from training.data import load_prompts

    with pytest.raises(ValueError, match="dataset_file is empty"):
        load_prompts([PromptSpec("push")], "")
    with pytest.raises(ValueError, match="eval_dataset_file is empty"):
        load_prompts([PromptSpec("push")], "  ", "held-out")


def test_a_saved_run_with_an_unread_empty_held_out_file_still_reads(tmp_path):
    """An earlier run could save eval_dataset_file: '' with eval_every 0 (never read): its config.yaml must still
    load for an export or a resume (it reads as unset, which is what the run did)."""
    import yaml

    from training.config_io import config_to_dict, read_run_config

    data = config_to_dict(_ok())
    data["eval_dataset_file"] = ""
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(data))
    assert read_run_config(tmp_path / "config.yaml").eval_dataset_file is None


@pytest.mark.parametrize("fps", [1e-4, 1 / 2002, 2.0**31])
def test_a_frame_rate_the_video_writer_cannot_store_is_a_config_error(fps):
    """1e-4 passed validation; the first rollout video or http reward clip then failed in write_video."""
    with pytest.raises(ConfigError, match=r"fps must be above 1/2002 and below 2\*\*31 \(what an mp4 stores"):
        validate(_ok(fps=fps))


def test_the_frame_rate_limit_is_the_writers(tmp_path):
    """The config's limit and write_video's are one function: a rate just inside it is written."""
    from tools.video_rate import fps_problem
    from tools.video_write import write_video

    frames = np.zeros((2, 8, 8, 3), np.uint8)
    for fps in (1 / 2002 + 1e-9, 16.0, 2.0**31 - 2):
        assert fps_problem(fps) is None
        validate(_ok(fps=fps))
        write_video(tmp_path / "ok.mp4", frames, fps=fps)
    for fps in (1 / 2002, 2.0**31, float("nan")):
        assert fps_problem(fps) is not None
        with pytest.raises(ValueError, match="fps must be above 1/2002"):
            write_video(tmp_path / "bad.mp4", frames, fps=fps)


@pytest.mark.parametrize(("name", "value", "message"), [
    ("WORLD_SIZE", "two", "WORLD_SIZE must be an integer >= 1, got 'two'"),
    ("WORLD_SIZE", "0", "WORLD_SIZE must be an integer >= 1, got '0'"),
    ("RANK", "x", "RANK must be an integer >= 0, got 'x'"),
    ("LOCAL_RANK", "", "LOCAL_RANK must be an integer >= 0, got ''"),
    ("LOCAL_WORLD_SIZE", "many", "LOCAL_WORLD_SIZE must be an integer >= 1, got 'many'"),
])
@pytest.mark.parametrize("check", [True, False])
def test_a_rank_variable_that_is_not_a_number_is_one_line(tmp_path, capsys, monkeypatch, name, value, message, check):
    """``int(os.environ["WORLD_SIZE"])`` raised a ValueError traceback in --check and in a launch."""
    import training.trainer
    from training.train import main

    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "LOCAL_SIZE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv(name, value)
    monkeypatch.setattr(training.trainer, "train", lambda *_a, **_k: pytest.fail("the run started"))
    args = ["--config", SMOKE, "--output_dir", str(tmp_path / "run")] + (["--check"] if check else [])
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"error: environment variable {message}", err


def test_a_rank_outside_the_world_is_a_config_error(monkeypatch):
    from training.train import rank_env

    with pytest.raises(ConfigError, match="RANK 2 is not below WORLD_SIZE 2"):
        rank_env({"RANK": "2", "WORLD_SIZE": "2"})
    assert rank_env({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}) == (1, 2, 1)
    assert rank_env({}) == (0, 1, 0)


@pytest.mark.parametrize("name", ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "LOCAL_SIZE"])
@pytest.mark.parametrize("value", ["1_0", "١", "1.0", "²"])
def test_a_rank_variable_not_plainly_written_is_refused_naming_it(name, value):
    """``int()`` took "1_0" as 10 and Arabic-Indic "١" as 1: a malformed launcher variable set the rank or the
    world size silently. The rule of `tools.env_numbers` (ASCII digits, optional sign) refuses it, naming it."""
    from training.train import rank_env

    with pytest.raises(ConfigError, match=rf"^environment variable {name} must be an integer >= \d, got "):
        rank_env({"WORLD_SIZE": "16", name: value})
    assert rank_env({"RANK": " 1 ", "WORLD_SIZE": "+2"}) == (1, 2, 0)  # what int() took plainly still is
