"""The DeepSpeed JSON's precision sections against ``dtype``: the config's dtype is the run's one precision
setting (the frozen reference, layout.json, the export and load_policy all follow it), so a JSON that enables
another one (most DeepSpeed examples carry ``"bf16": {"enabled": true}``) is a config error before the model
loads, not an engine that silently trains in bf16 while everything else assumes float32."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training.config import ConfigError, PromptSpec, TrainConfig
from training.engine import deepspeed_config

SMOKE = str(Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml")


def _json(tmp_path: Path, **sections) -> str:
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"zero_optimization": {"stage": 2}, **sections}))
    return str(path)


def _cfg(ds: str, dtype: str) -> TrainConfig:
    return TrainConfig(tiny=True, reward="brightness", dataset=[PromptSpec("push")], ds_config=ds, dtype=dtype)


@pytest.mark.parametrize(("section", "dtype"), [("bf16", "float32"), ("fp16", "float32"), ("fp16", "bfloat16"),
                                                ("bf16", "float16"), ("bfloat16", "float32")])
def test_a_json_enabling_another_precision_than_dtype_is_refused(tmp_path, section, dtype):
    ds = _json(tmp_path, **{section: {"enabled": True}})
    with pytest.raises(ConfigError, match=rf"enables {section} but dtype is {dtype}"):
        deepspeed_config(_cfg(ds, dtype), 1)


def test_a_json_agreeing_with_dtype_or_disabled_is_kept(tmp_path):
    ds = _json(tmp_path, bf16={"enabled": True}, fp16={"enabled": False})
    assert deepspeed_config(_cfg(ds, "bfloat16"), 1)["bf16"] == {"enabled": True}
    off = deepspeed_config(_cfg(_json(tmp_path, bf16={"enabled": False}), "float32"), 1)
    assert off["bf16"] == {"enabled": False} and "fp16" not in off


def test_check_and_launch_stop_before_the_model_loads(tmp_path, capsys, monkeypatch):
    from training.train import main

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    ds = _json(tmp_path, bf16={"enabled": True})
    args = ["--config", SMOKE, "--output_dir", str(tmp_path / "run"), "--ds_config", ds]
    assert main([*args, "--check"]) == 2
    err = capsys.readouterr().err
    assert "enables bf16 but dtype is float32" in err and "dtype: bfloat16" in err
    assert main(args) == 2 and not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.parametrize(("stage", "shown"), [(4, "4"), ("two", "'two'"), (-1, "-1"), (True, "True"), (2.5, "2.5"),
                                           ("3", "'3'"), (3.0, "3.0")])
def test_a_zero_stage_deepspeed_has_not_is_a_config_error(tmp_path, stage, shown):
    """The JSON's zero_optimization.stage: 4 passed `--check` ("ok ... ZeRO stage 4") and failed in DeepSpeed after
    the model had loaded; "two" was a bare int() ValueError traceback."""
    from training.resume import state_layout

    ds = _json(tmp_path, zero_optimization={"stage": stage})
    with pytest.raises(ConfigError, match=rf"zero_optimization.stage must be 0, 1, 2 or 3 \(a JSON number\), got {shown}"):
        state_layout(_cfg(ds, "float32"))


def test_a_json_zero_stage_of_0_to_3_or_none_is_read(tmp_path):
    from training.resume import state_layout

    assert state_layout(_cfg(_json(tmp_path, zero_optimization={"stage": 3}), "float32")).zero_stage == 3
    path = tmp_path / "plain.json"
    path.write_text("{}")
    assert state_layout(_cfg(str(path), "float32")).zero_stage == 0  # DeepSpeed's default


def test_a_json_scheduler_is_refused_for_the_config_s_own_schedule(tmp_path, capsys, monkeypatch):
    """A JSON "scheduler" (DeepSpeed's WarmupLR ...) was ignored when lr_warmup_steps / lr_schedule are set (the
    trainer passes its own scheduler, which DeepSpeed prefers), ran in place of the config's constant rate
    otherwise, restarted its warmup on a resume (its state is not loaded) and then failed there with an
    AttributeError: the resume sets the rate through the trainer's LambdaLR."""
    from training.train import main

    ds = _json(tmp_path, scheduler={"type": "WarmupLR", "params": {"warmup_num_steps": 10}})
    with pytest.raises(ConfigError, match=r"has a scheduler section: .*lr_warmup_steps, lr_schedule"):
        deepspeed_config(_cfg(ds, "float32"), 1)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert main(["--config", SMOKE, "--output_dir", str(tmp_path / "run"), "--ds_config", ds, "--check"]) == 2
    assert "has a scheduler section" in capsys.readouterr().err
