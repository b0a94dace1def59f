"""TrainConfig: YAML loading, CLI overrides and validation before any model loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.launches import launch
from training.config import ConfigError, PromptSpec, TrainConfig
from training.config_checks import validate
from training.config_io import load_config, parse_cli
from training.ds_config import resolve_ds_config

CONFIGS = Path(__file__).resolve().parents[1] / "training" / "configs"


def _ok(**kw) -> TrainConfig:
    base = dict(tiny=True, reward="brightness", dataset=[PromptSpec(text="push the block")])
    base.update(kw)
    return TrainConfig(**base)


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


BASE_YAML = "tiny: true\nreward: brightness\ndataset:\n  - {text: push the block}\n"


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"tau": 1.0}, "tau must be in"),
        ({"tau": 0.0}, "tau must be in"),
        ({"r_base": 0.0}, "r_base must be in"),
        ({"r_base": 1.5}, "r_base must be in"),
        ({"group_size": 1}, "group_size must be >= 2"),
        ({"sde_window": (0, 11)}, "sde_window"),
        ({"sde_window": (3, 3)}, "sde_window"),
        ({"sde_window": (-1, 2)}, "sde_window"),
        ({"sde_window": (9, 10)}, "holds only the last step"),
        ({"reward": None}, "reward is missing: set reward to one of brightness, motion, agent, http, sum"),
        ({"tiny": False}, "model_path is required"),
        ({"dataset": []}, "no prompts"),
        ({"zero_stage": 4}, "zero_stage"),
        ({"clip_range": 0.0}, "clip_range"),
        ({"clip_range": 1.0}, r"clip_range must be below 1 \(or inf: no clipping\), got 1.0: the lower clip bound"),
        ({"clip_range": 1.5}, r"clip_range must be below 1.*1 - clip_range"),  # a one-sided clip, unnoticed
        ({"max_log_ratio": 0.0}, "max_log_ratio must be > 0 and finite, got 0.0"),
        ({"max_log_ratio": float("inf")}, "max_log_ratio must be > 0 and finite, got inf"),  # no bound: exp overflows
        ({"optimizer_steps_per_epoch": 3}, "optimizer_steps_per_epoch"),
        ({"max_skipped_iterations": 0}, "max_skipped_iterations must be >= 1"),
        ({"lr_warmup_steps": -1}, "lr_warmup_steps must be >= 0"),
        ({"seed": -1}, r"seed must be >= 0 and < 2\*\*32 \(numpy's seed range\), got -1"),
        ({"seed": 2**32}, r"< 2\*\*32 \(numpy's seed range\), got 4294967296"),  # passed, then np.random.seed
        ({"finetune": "lora", "lora_alpha": 0.0}, "lora_alpha must be > 0 and finite with finetune lora, got 0.0"),
        ({"finetune": "lora", "lora_alpha": -4.0}, "lora_alpha must be > 0"),
        ({"finetune": "lora", "lora_alpha": float("nan")}, "lora_alpha must be > 0"),
        ({"learning_rate": float("inf")}, "learning_rate must be > 0 and finite, got inf"),
        ({"fps": float("inf")}, r"fps must be above 1/2002 and below 2\*\*31"),
        ({"guidance_scale": float("inf")}, "guidance_scale must be finite and >= 0, got inf"),
        ({"num_steps": 1, "sde_window": (0, 1)}, r"holds only the last step.*: set num_steps >= 2"),
        ({"dataset": [PromptSpec("push"), PromptSpec("pull", image_seed=-1)]},
         r"dataset\[1\]: 'image_seed' must be >= 0, got -1 \(prompt 'pull'\)"),
        ({"eval_dataset": [PromptSpec("pull", image_seed=-2)]}, r"eval_dataset\[0\]: 'image_seed' must be >= 0"),
        ({"dataset": [PromptSpec("")]}, r"dataset\[0\]: 'text' must be a non-empty string, got ''"),
        ({"dataset": [PromptSpec("   ")]}, r"dataset\[0\]: 'text' must be a non-empty string, got '   '"),
        ({"adv_eps": 0.0}, "adv_eps must be > 0"),
        ({"beta": float("inf")}, "beta must be >= 0 and finite, got inf"),  # inf * 0 = NaN: a false divergence
        ({"weight_decay": float("inf")}, "weight_decay must be >= 0 and finite, got inf"),
        ({"beta": -0.1}, "beta must be >= 0"),
        ({"output_dir": ""}, r"output_dir must name a folder \(\. for the current directory\), got ''"),  # "$OUT" unset
        ({"output_dir": "  "}, "output_dir must name a folder"),
    ],
)
def test_bad_values_are_rejected_with_clear_errors(kw, match):
    with pytest.raises(ConfigError, match=match):
        validate(_ok(**kw))


@pytest.mark.parametrize("name", ["micro_batch", "optimizer_steps_per_epoch"])
def test_a_zero_divisor_is_a_config_error_not_a_crash(name):
    # validate divides by both to count the micro-batches: a 0 raised ZeroDivisionError, a traceback
    # instead of the exit-2 message that names the field
    with pytest.raises(ConfigError, match=rf"{name} must be >= 1, got 0"):
        validate(_ok(**{name: 0}))


def test_all_problems_listed_at_once():
    with pytest.raises(ConfigError) as err:
        validate(_ok(tau=2.0, group_size=1))
    assert "tau" in str(err.value) and "group_size" in str(err.value)


def test_valid_config_passes():
    cfg = validate(_ok())
    assert cfg.sde_window == (0, 4) and cfg.group_size == 8
    # a window over every step (Flow-GRPO style) is fine: the last one is deterministic and records nothing,
    # so 9 SDE steps x ceil(8 / micro_batch) micro-batches must be divisible by optimizer_steps_per_epoch
    assert validate(_ok(sde_window=(0, 10), optimizer_steps_per_epoch=9)).sde_window == (0, 10)
    per_step = -(-8 // TrainConfig().micro_batch)
    with pytest.raises(ConfigError, match=rf"micro-batches per prompt per epoch \({9 * per_step} = "):
        validate(_ok(sde_window=(0, 10), optimizer_steps_per_epoch=10))
    assert validate(_ok(clip_range=float("inf"))).clip_range == float("inf")  # no clipping at all: on purpose


def test_yaml_unknown_field_and_types(tmp_path):
    with pytest.raises(ConfigError, match="unknown field.*bogus"):
        load_config(_write(tmp_path, BASE_YAML + "bogus: 1\n"))
    with pytest.raises(ConfigError, match="group_size: expected"):
        load_config(_write(tmp_path, BASE_YAML + "group_size: four\n"))
    with pytest.raises(ConfigError, match="finetune: must be one of"):
        load_config(_write(tmp_path, BASE_YAML + "finetune: half\n"))
    # YAML reads an unquoted off as False: the README's `reward_overlap: off` was refused
    assert load_config(_write(tmp_path, BASE_YAML + "reward_overlap: off\n")).reward_overlap == "off"
    with pytest.raises(ConfigError, match=r"finetune: must be one of \['lora', 'full'\], got the boolean .*quote"):
        load_config(_write(tmp_path, BASE_YAML + "finetune: no\n"))
    with pytest.raises(ConfigError, match="dataset"):
        load_config(_write(tmp_path, "tiny: true\nreward: motion\ndataset:\n  - {txt: a}\n"))
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match=r"c.yaml: not valid YAML \(.*line 3"):  # was a yaml traceback
        load_config(_write(tmp_path, "tiny: true\nreward: brightness\ndataset: [unclosed\n"))
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(_write(tmp_path, "- tiny\n"))


def test_cli_overrides(tmp_path):
    path = _write(tmp_path, BASE_YAML + "max_iterations: 5\n")
    cfg = parse_cli(["--config", str(path), "--output_dir", "/tmp/x", "--resume", "--max_iterations", "7",
                     "--tau=0.5", "--sde_window", "[1, 3]", "--reward_options", "{region: [0, 0, 1, 0.5]}",
                     "--zero_stage", "3", "--local_rank=1", "--tensorboard", "false", "--model_path", "none"])
    assert cfg.output_dir == "/tmp/x" and cfg.resume is True and cfg.max_iterations == 7
    assert cfg.tau == 0.5 and cfg.sde_window == (1, 3) and cfg.zero_stage == 3
    assert cfg.reward_options == {"region": [0, 0, 1, 0.5]} and cfg.tensorboard is False
    assert cfg.model_path is None
    assert cfg.dataset == [PromptSpec(text="push the block")]


def test_cli_errors(tmp_path):
    path = str(_write(tmp_path, BASE_YAML))
    with pytest.raises(ConfigError, match="unknown option --nope; valid fields"):  # nothing close: no guess
        parse_cli(["--config", path, "--nope", "1"])
    with pytest.raises(ConfigError, match=r"unknown option --lerning_rate \(did you mean --learning_rate\?\)"):
        parse_cli(["--config", path, "--lerning_rate", "1e-4"])
    (tmp_path / "typo.yaml").write_text("lerning_rate: 1e-4\ngroup_sise: 4\n")
    with pytest.raises(ConfigError, match=r"^config: unknown field\(s\) \['group_sise', 'lerning_rate'\] "
                                          r"\(did you mean group_size, learning_rate\?\)"):
        parse_cli(["--config", str(tmp_path / "typo.yaml")])
    with pytest.raises(ConfigError, match="tau must be in"):
        parse_cli(["--config", path, "--tau", "1.5"])
    with pytest.raises(ConfigError, match="max_iterations: expected an integer"):
        parse_cli(["--config", path, "--max_iterations", "ten"])
    with pytest.raises(ConfigError, match="resume: expected a boolean"):
        parse_cli(["--config", path, "--resume", "maybe"])
    with pytest.raises(ConfigError, match="needs a value"):
        parse_cli(["--config", path, "--tau"])


def test_yaml_booleans_as_strings_parse_and_bad_ones_name_the_field(tmp_path):
    """Quoted "false" / "no" / "off" in a file are false (not a non-empty string, true); a number or a list is
    an error that says a boolean was expected (it printed "expected <class 'bool'>, got 0")."""
    base = "tiny: true\nreward: brightness\ndataset: [{text: a}]\n"
    for text, want in (('"false"', False), ('"no"', False), ('"off"', False), ('"On"', True), ("yes", True)):
        (tmp_path / "c.yaml").write_text(f"{base}gradient_checkpointing: {text}\nprogress: {text}\n")
        cfg = parse_cli(["--config", str(tmp_path / "c.yaml")])
        assert (cfg.gradient_checkpointing, cfg.progress) == (want, want), text
    for text in ('"maybe"', "0", "2", "[]"):
        (tmp_path / "c.yaml").write_text(f"{base}gradient_checkpointing: {text}\n")
        with pytest.raises(ConfigError, match=r"^gradient_checkpointing: expected a boolean \(true/false\), got "):
            parse_cli(["--config", str(tmp_path / "c.yaml")])


def test_bundled_configs_load_and_validate():
    for name in ("smoke.yaml", "cosmos2_5_2b.yaml", "wan2_2_ti2v_5b.yaml"):
        cfg = load_config(CONFIGS / name)
        assert cfg.reward is not None
        assert resolve_ds_config(cfg.ds_config).is_file()
    assert resolve_ds_config("ds_zero3.json").name == "ds_zero3.json"
    with pytest.raises(ConfigError, match="not found"):
        resolve_ds_config("ds_zero9.json")


def test_entry_point_rejects_bad_config_before_model_load():
    import sys

    proc = launch([sys.executable, "-m", "training.train", "--config", str(CONFIGS / "smoke.yaml"),
                   "--tau", "1.2", "--group_size", "1"], timeout=60, what="training")
    assert proc.returncode == 2
    assert "tau must be in (0, 1)" in proc.stderr and "group_size must be >= 2" in proc.stderr
    assert "deepspeed" not in proc.stderr.lower()  # failed before the trainer (and any model) was imported


def test_guidance_scale_is_validated():
    with pytest.raises(ConfigError, match="guidance_scale must be finite and >= 0"):
        load_config(CONFIGS / "smoke.yaml", ["--guidance_scale", "-1"])
    assert load_config(CONFIGS / "smoke.yaml", ["--guidance_scale", "4.5"]).guidance_scale == 4.5


@pytest.mark.slow
def test_missing_prompt_files_stop_before_model_load(tmp_path):
    import sys

    for flags, message in ((["--dataset_file", str(tmp_path / "nope.jsonl")], "prompt file not found: "),
                           (["--eval_every", "5", "--eval_dataset_file", str(tmp_path / "held.jsonl")],
                            "held.jsonl")):
        proc = launch([sys.executable, "-m", "training.train", "--config", str(CONFIGS / "smoke.yaml"), *flags],
                      timeout=60, what="training")
        assert proc.returncode == 2, proc.stderr
        assert message in proc.stderr and "Traceback" not in proc.stderr and "deepspeed" not in proc.stderr.lower()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"image": "x.png"}\n')
    proc = launch([sys.executable, "-m", "training.train", "--config", str(CONFIGS / "smoke.yaml"),
                   "--dataset_file", str(bad)], timeout=60, what="training")
    assert proc.returncode == 2 and "bad.jsonl:1: a prompt needs 'text'" in proc.stderr
    (tmp_path / "imgs.jsonl").write_text('{"text": "open", "image": "missing.png"}\n')
    proc = launch([sys.executable, "-m", "training.train", "--config", str(CONFIGS / "smoke.yaml"),
                   "--dataset_file", str(tmp_path / "imgs.jsonl")], timeout=60, what="training")
    assert proc.returncode == 2 and "prompt image not found" in proc.stderr and "missing.png" in proc.stderr
    assert "deepspeed" not in proc.stderr.lower()


@pytest.mark.parametrize(("rows", "message"), [
    ('{"text": "ok"}\n{"text": 123}\n', "prompts.jsonl:2: 'text' must be a non-empty string, got 123"),
    ('{"text": "ok", "image": 5}\n', "prompts.jsonl:1: 'image' must be a file path (a non-empty string) or null, got 5"),
    ("\n\n", "holds no prompt rows (it is empty or blank)"),
])
def test_a_mistyped_or_empty_prompt_file_is_a_config_error(tmp_path, capsys, rows, message):
    """A numeric image was a TypeError traceback; a numeric text failed when drawn; an empty file's error
    did not name it."""
    from training.train import main

    (tmp_path / "prompts.jsonl").write_text(rows)
    config = _write(tmp_path, f"tiny: true\nreward: brightness\ndataset_file: {tmp_path / 'prompts.jsonl'}\n")
    assert main(["--config", str(config), "--output_dir", str(tmp_path / "run"), "--check"]) == 2
    err = capsys.readouterr().err
    assert message in err and str(tmp_path / "prompts.jsonl") in err and "Traceback" not in err


@pytest.mark.slow
def test_agent_reward_without_endpoint_stops_before_model_load(tmp_path):
    """reward: agent with no RAA_BASE_URL would make every reward ineligible: exit 2 with the connect help."""
    import os
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("RAA_")}
    proc = launch([sys.executable, "-m", "training.train", "--config", str(CONFIGS / "smoke.yaml"),
                   "--reward", "agent", "--output_dir", str(tmp_path / "run")], timeout=60, what="training", env=env)
    assert proc.returncode == 2, proc.stderr
    assert "reward: agent needs its backbone endpoint" in proc.stderr and "RAA_BASE_URL" in proc.stderr
    assert "deepspeed" not in proc.stderr.lower()
    env["RAA_INSPECT_MODE"] = "sometimes"
    proc = launch([sys.executable, "-m", "training.train", "--config", str(CONFIGS / "smoke.yaml"),
                   "--reward", "agent", "--output_dir", str(tmp_path / "run")], timeout=60, what="training", env=env)
    assert proc.returncode == 2 and "RAA_INSPECT_MODE" in proc.stderr


@pytest.mark.slow
def test_bad_reward_options_and_an_unusable_trace_database_exit_2(tmp_path):
    """Each surfaced as a traceback (exit 1) or only at the first reward call, inside the run (every reward
    ineligible); now each stops the run at start with one error line."""
    import os
    import sys

    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RAA_")}, "RAA_BASE_URL": "http://127.0.0.1:9/v1",
           "RAA_MODEL": "m", "RAA_API_KEY": "EMPTY", "RAA_CACHE_PATH": "off", "RAA_ENDPOINT_WAIT_S": "0"}
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database" * 20)
    base = [sys.executable, "-m", "training.train", "--config", str(CONFIGS / "smoke.yaml"), "--reward", "agent",
            "--output_dir", str(tmp_path / "run"), "--max_iterations", "1"]
    for extra, variables, message in (([], {"RAA_TRACES_PATH": str(tmp_path / "t.sqlite")},
                                       "reward 'agent': bad reward_options"),  # the smoke config's brightness options
                                      (["--reward_options", "{preset: decomposed}"], {"RAA_TRACES_PATH": str(junk)},
                                       f"trace database {junk} cannot be used"),
                                      (["--reward_options", "{preset: full}"],
                                       {"RAA_TRACES_PATH": str(tmp_path / "t.sqlite"),
                                        "RAA_VJEPA_MODEL": str(tmp_path / "no-vjepa")},
                                       "the surprise tool cannot load")):
        proc = launch(base + extra, timeout=300, what="training", env={**env, **variables})
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert message in proc.stderr and "Traceback" not in proc.stderr


def test_help_lists_every_field_with_its_default_and_docstring(capsys):
    """`python -m training.train --help` (it said "unknown option --help"): the config's own docstrings."""
    import dataclasses

    from training.cli_help import field_docs
    from training.config import TrainConfig
    from training.train import main

    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    names = [f.name for f in dataclasses.fields(TrainConfig)]
    docs = field_docs()
    assert [name for _, name, _ in docs] == names  # every field, in source order
    assert all(doc for _, _, doc in docs), [name for _, name, doc in docs if not doc]  # each documented
    for name in names:
        assert f"\n  --{name}  (" in out, name
    assert "  --zero_stage  (int | None; default None)\n      Overrides zero_optimization.stage" in out
    assert "\noptimisation / DeepSpeed:\n" in out and out.startswith("usage: python -m training.train")
    assert "[--check]" in out.split("\n\n")[0] and "--check: " in out  # a flag, not a field: only the usage says it
    assert main(["-h"]) == 0 and capsys.readouterr().out == out


def test_check_makes_the_launch_checks_and_exits(tmp_path, capsys, monkeypatch):
    """`--check`: the resolved config and what a launch would do, without loading a model."""
    from tests.test_checkpoints import _fake_checkpoint
    from training.resume import StateLayout, write_layout
    from training.train import main

    smoke = str(Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml")
    out = tmp_path / "run"
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert main(["--config", smoke, "--output_dir", str(out), "--check"]) == 0
    text = capsys.readouterr().out
    assert f"output_dir: {out}" in text and "check: ok for 1 rank (WORLD_SIZE): 4 training prompts" in text
    assert "ZeRO stage 2, float32" in text and not out.exists()  # nothing written
    monkeypatch.setenv("WORLD_SIZE", "3")
    assert main(["--config", smoke, "--output_dir", str(out), "--check"]) == 2  # never the repo's runs/smoke
    assert "must be divisible by the number of ranks (3)" in capsys.readouterr().err
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert main(["--config", smoke, "--output_dir", str(out), "--resume", "--check"]) == 2
    assert "no checkpoint in" in capsys.readouterr().err
    _fake_checkpoint(out / "checkpoints", "iter_000002", ranks=1)
    write_layout(out / "checkpoints" / "iter_000002", StateLayout(2, "float32"))
    assert main(["--config", smoke, "--output_dir", str(out), "--resume", "--check"]) == 0
    assert "resume: from iter_000002\n" in capsys.readouterr().out + "\n"
    assert main(["--config", smoke, "--output_dir", str(out), "--resume", "--zero_stage", "3", "--check"]) == 2
    assert "saved under ZeRO stage 2 and this launch runs stage 3" in capsys.readouterr().err


def test_a_bad_deepspeed_json_is_a_config_error(tmp_path):
    """It was a JSONDecodeError traceback from DeepSpeed's config step, after the model had loaded."""
    from training.ds_config import read_ds_config

    assert read_ds_config("ds_zero2.json")["zero_optimization"]["stage"] == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{bad")
    with pytest.raises(ConfigError, match=r"ds_config '.*bad.json' is not valid JSON: Expecting property name"):
        read_ds_config(str(bad))
    bad.write_bytes(b"\xef\xbb\xbf" + b'{"train_batch_size": 2}')  # a byte-order mark (Windows editors)
    assert read_ds_config(str(bad)) == {"train_batch_size": 2}
    bad.write_text("[1]")
    with pytest.raises(ConfigError, match="must hold a JSON object, got list"):
        read_ds_config(str(bad))
    with pytest.raises(ConfigError, match="ds_config 'nope.json' not found"):
        read_ds_config("nope.json")


def test_a_missing_prompt_file_names_the_option_that_sets_it(tmp_path):
    """`--check` said only "prompt file not found: data/robot_prompts.jsonl": nothing told a newcomer that the
    `dataset_file` setting (or `--dataset_file`) points there, nor where a relative path is read from."""
    from training.train import check_prompts

    for flags, field in ((["--dataset_file", "nope.jsonl"], "dataset_file"),
                         (["--eval_every", "5", "--eval_dataset_file", str(tmp_path / "held.jsonl")],
                          "eval_dataset_file")):
        with pytest.raises(ConfigError) as err:
            check_prompts(load_config(CONFIGS / "smoke.yaml", flags))
        message = str(err.value)
        assert message.startswith(f"{field}: prompt file not found: "), message
        assert f"--{field} PATH" in message and "directory the run is launched from" in message
