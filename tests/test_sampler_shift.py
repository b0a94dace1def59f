"""The sampling shift comes from the checkpoint's scheduler config when the config sets none, and a resume keeps
the run's (policy/schedule_shift.py, training/sampler_shift.py). TrainConfig.shift defaulted to 3.0 for every
model: Wan 2.2 TI2V-5B, whose scheduler samples with flow_shift 5.0, was trained and evaluated off its schedule."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from policy.schedule_shift import DEFAULT_SHIFT, checkpoint_shift, scheduler_shift
from training.config import ConfigError, TrainConfig
from training.config_checks import validate
from training.config_io import write_run_config
from training.sampler_shift import resolve_shift

WAN22 = {"_class_name": "UniPCMultistepScheduler", "flow_shift": 5.0, "use_flow_sigmas": True,
         "prediction_type": "flow_prediction"}
COSMOS25 = {"_class_name": "UniPCMultistepScheduler", "use_karras_sigmas": True, "use_flow_sigmas": True,
            "sigma_max": 200.0, "sigma_min": 0.01, "flow_shift": 1.0}


def _checkpoint(root: Path, scheduler: dict | None) -> Path:
    """A model folder holding only what the shift is read from."""
    root.mkdir(parents=True)
    if scheduler is not None:
        (root / "scheduler").mkdir()
        (root / "scheduler" / "scheduler_config.json").write_text(json.dumps(scheduler))
    return root


@pytest.mark.parametrize(("config", "want"), [
    (WAN22, 5.0),
    ({**WAN22, "flow_shift": 3.0}, 3.0),  # Wan 2.1 I2V 480P
    ({"_class_name": "FlowMatchEulerDiscreteScheduler", "shift": 7.0}, 7.0),
    ({"_class_name": "FlowMatchEulerDiscreteScheduler"}, 1.0),  # diffusers' default shift
    ({"_class_name": "FlowMatchEulerDiscreteScheduler", "shift": 3.0, "use_dynamic_shifting": True}, None),
    (COSMOS25, None),  # Karras sigmas: no shift reproduces them
    ({**WAN22, "use_flow_sigmas": False}, None),
    ({**WAN22, "flow_shift": 0.0}, None),
    ({"_class_name": "DDIMScheduler"}, None),
])
def test_scheduler_shift_reads_each_schedulers_own_name(config, want):
    value, how = scheduler_shift(config)
    assert value == want and how


def test_checkpoint_shift_reads_the_folder_or_falls_back_saying_why(tmp_path):
    assert checkpoint_shift(_checkpoint(tmp_path / "wan", WAN22)).value == 5.0
    cosmos = checkpoint_shift(_checkpoint(tmp_path / "cosmos", COSMOS25))
    assert cosmos.value == DEFAULT_SHIFT and "karras" in cosmos.source
    bare = checkpoint_shift(_checkpoint(tmp_path / "bare", None))
    assert bare.value == DEFAULT_SHIFT and "scheduler_config.json" in bare.source


def test_a_schedule_stretched_to_shift_terminal_is_no_single_shift(tmp_path):
    """FlowMatchEulerDiscreteScheduler with ``shift_terminal`` (LTX-Video's 0.1) stretches its shifted schedule so
    it ends at that sigma; its ``shift`` was read as the checkpoint's and ``shift_terminal`` ignored, so the run
    sampled another schedule than the checkpoint's while its log said it used the scheduler's own."""
    ltx = {"_class_name": "FlowMatchEulerDiscreteScheduler", "shift": 1.0, "shift_terminal": 0.1}
    assert scheduler_shift(ltx) == (None, "FlowMatchEulerDiscreteScheduler stretches its schedule to end at "
                                          "shift_terminal 0.1, which no shift reproduces")
    assert scheduler_shift({**ltx, "shift_terminal": None}) == (1.0, "FlowMatchEulerDiscreteScheduler shift")
    choice = checkpoint_shift(_checkpoint(tmp_path / "ltx", ltx))
    assert choice.value == DEFAULT_SHIFT and "shift_terminal 0.1" in choice.source, choice

def test_unset_shift_is_the_checkpoints(tmp_path):
    model = _checkpoint(tmp_path / "wan", WAN22)
    cfg = TrainConfig(model_path=str(model), tiny=False)
    assert cfg.shift is None  # the default: the checkpoint's
    resolved, note = resolve_shift(cfg)
    assert resolved.shift == 5.0 and "5" in note and "scheduler" in note
    assert resolve_shift(dataclasses.replace(cfg, shift=2.0))[0].shift == 2.0  # the config's own wins
    assert resolve_shift(TrainConfig(tiny=True))[0].shift == DEFAULT_SHIFT


def test_a_resume_keeps_the_runs_saved_shift(tmp_path):
    """The run trained with 3.0 (an earlier default); its checkpoint's scheduler now says 5.0: a resume without a
    shift of its own goes on with 3.0, not silently with 5.0."""
    model = _checkpoint(tmp_path / "wan", WAN22)
    out = tmp_path / "run"
    out.mkdir()
    cfg = TrainConfig(model_path=str(model), tiny=False, output_dir=str(out), dataset_file="p.jsonl",
                      reward="brightness")
    write_run_config(out, dataclasses.replace(cfg, shift=3.0))
    resolved, note = resolve_shift(dataclasses.replace(cfg, resume=True))
    assert resolved.shift == 3.0 and "config.yaml" in note
    assert resolve_shift(cfg)[0].shift == 5.0  # a fresh run reads the checkpoint


def test_validate_takes_an_unset_shift_and_refuses_a_bad_one():
    base = TrainConfig(tiny=True, dataset_file="p.jsonl", reward="brightness")
    assert validate(base).shift is None
    with pytest.raises(ConfigError, match="shift"):
        validate(dataclasses.replace(base, shift=0.0))


def test_the_sampler_refuses_an_unresolved_shift():
    """rollout_config of a config whose shift was never resolved names the fix (it was a TypeError deep inside)."""
    from policy.rollout import RolloutConfigError
    from training.update import rollout_config

    with pytest.raises(RolloutConfigError, match="resolve_shift"):
        rollout_config(TrainConfig())
    assert rollout_config(resolve_shift(TrainConfig(tiny=True))[0]).shift == DEFAULT_SHIFT


def test_check_says_which_shift_the_launch_would_use(tmp_path, capsys, monkeypatch):
    from training.train import main

    smoke = str(Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert main(["--config", smoke, "--output_dir", str(tmp_path / "run"), "--shift", "none", "--check"]) == 0
    text = capsys.readouterr().out
    assert "\nshift: 3.0\n" in text and "sampling shift 3 (the default (no checkpoint" in text


@pytest.mark.slow  # a training launch in process (~15 s here)
@pytest.mark.usefixtures("one_rank_env")
def test_a_run_records_the_shift_it_sampled_with(tmp_path, capsys):
    """config.yaml (what export, generate and a resume read) holds the resolved number, not None."""
    import yaml

    from tests.test_prompt_failures import _prompt_file, _run_cfg
    from training.trainer import train

    cfg = dataclasses.replace(_run_cfg(tmp_path, _prompt_file(tmp_path)), shift=None)
    out = train(cfg)
    assert yaml.safe_load((out / "config.yaml").read_text())["shift"] == DEFAULT_SHIFT
    assert "sampling shift 3 (the default" in capsys.readouterr().out


def test_a_saved_config_without_a_shift_reads_as_the_old_default(tmp_path):
    """A saved config lacking shift (hand-written, or from before the default changed) was sampled with 3.0: an
    export, generate or resume must not read it as None (no schedule) or as another checkpoint's shift."""
    import yaml

    from training.config_io import config_to_dict, read_run_config

    data = config_to_dict(TrainConfig(tiny=True, dataset_file="p.jsonl", reward="brightness", shift=3.0))
    del data["shift"]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(data))
    assert read_run_config(tmp_path / "config.yaml").shift == DEFAULT_SHIFT


def _hub(monkeypatch: pytest.MonkeyPatch, asked: list) -> None:
    """diffusers' config loader replaced (no network here), raising as diffusers 0.42 does: its OSError raised in
    the ``except`` of the hub's error (``offline/``: not reached and not cached; ``bare/``: the repo answers it has
    no such file)."""
    import diffusers
    from huggingface_hub.errors import LocalEntryNotFoundError, RemoteEntryNotFoundError

    def load_config(root, subfolder=None, revision=None):
        asked.append((root, subfolder, revision))
        try:
            if root.startswith("offline/"):
                raise LocalEntryNotFoundError("cannot reach the hub and the file is not in the cache")
            if root.startswith("bare/"):
                missing = RemoteEntryNotFoundError.__new__(RemoteEntryNotFoundError)  # needs an HTTP response
                Exception.__init__(missing, "404 Client Error: Entry Not Found")
                raise missing
        except Exception:
            raise OSError(f"{root} does not appear to have a file named scheduler_config.json.")  # noqa: B904
        return WAN22

    monkeypatch.setattr(diffusers.UniPCMultistepScheduler, "load_config", load_config)


def test_a_hub_id_reads_its_scheduler_config_at_the_revision(monkeypatch):
    """A hub id (model_path: Wan-AI/...) goes through diffusers' config loader with the run's revision; a repo
    without a scheduler config falls back, saying why."""
    asked: list = []
    _hub(monkeypatch, asked)
    assert checkpoint_shift("Wan-AI/Wan2.2-TI2V-5B-Diffusers", "main").value == 5.0
    assert asked == [("Wan-AI/Wan2.2-TI2V-5B-Diffusers", "scheduler", "main")]
    bare = checkpoint_shift("bare/model")
    assert bare.value == DEFAULT_SHIFT and "bare/model has no scheduler/scheduler_config.json" in bare.source


def test_a_launch_that_cannot_read_the_checkpoints_scheduler_refuses_naming_shift(monkeypatch, tmp_path):
    """The hub not reached (and the file not cached): the launch fell back to 3.0 with one line on stdout, so an RL
    run of Wan 2.2 TI2V-5B (5.0) sampled, trained and recorded another schedule because of an outage. It now
    stops naming --shift; with a shift of its own it launches; a local file that is no JSON stops it too."""
    from policy.checkpoint import CheckpointFileUnreadable

    _hub(monkeypatch, [])
    with pytest.raises(CheckpointFileUnreadable, match="offline/model's scheduler/scheduler_config.json cannot be"):
        checkpoint_shift("offline/model")
    cfg = TrainConfig(model_path="offline/model", tiny=False)
    with pytest.raises(ConfigError, match=r"shift: unset, and the checkpoint's own cannot be read: .*Pass --shift N"):
        resolve_shift(cfg)
    assert resolve_shift(dataclasses.replace(cfg, shift=5.0))[0].shift == 5.0
    broken = _checkpoint(tmp_path / "wan", None)
    (broken / "scheduler").mkdir()
    (broken / "scheduler" / "scheduler_config.json").write_text('{"flow_shift": 5.0,')  # cut short
    with pytest.raises(ConfigError, match="Pass --shift N"):
        resolve_shift(TrainConfig(model_path=str(broken), tiny=False))


def test_a_resume_keeps_the_saved_shift_of_a_config_todays_checks_refuse(tmp_path):
    """A run saved with a value a later check refuses (clip_range 2, before clip_range >= 1 was refused) and
    resumed with that value fixed: its saved config.yaml no longer validates as a whole, yet it says which shift
    the run sampled with. The resume took the checkpoint's (5.0) instead of the run's 3.0."""
    import yaml

    from training.config_io import config_to_dict

    model = _checkpoint(tmp_path / "wan", WAN22)
    out = tmp_path / "run"
    out.mkdir()
    cfg = TrainConfig(model_path=str(model), tiny=False, output_dir=str(out), dataset_file="p.jsonl",
                      reward="brightness")
    (out / "config.yaml").write_text(yaml.safe_dump({**config_to_dict(dataclasses.replace(cfg, shift=3.0)),
                                                     "clip_range": 2.0}))
    resolved, note = resolve_shift(dataclasses.replace(cfg, resume=True))
    assert resolved.shift == 3.0 and "config.yaml" in note


def _resumed(tmp_path: Path, saved: str | None) -> TrainConfig:
    """A resume (no shift of its own) of a run whose config.yaml holds ``saved`` (None: no config.yaml), on a
    checkpoint whose scheduler says 5.0."""
    import yaml

    from training.config_io import config_to_dict

    model = _checkpoint(tmp_path / "wan", WAN22)
    out = tmp_path / "run"
    out.mkdir()
    cfg = TrainConfig(model_path=str(model), tiny=False, output_dir=str(out), dataset_file="p.jsonl",
                      reward="brightness", resume=True)
    if saved is not None:
        data = config_to_dict(dataclasses.replace(cfg, shift=3.0))
        (out / "config.yaml").write_text(yaml.safe_dump({**data, "shift": yaml.safe_load(saved)})
                                         if saved != "unreadable" else "{not yaml: [")
    return cfg


def test_a_resume_refuses_a_saved_shift_that_generate_refuses(tmp_path):
    """config.yaml with ``shift: null`` (by hand): training.generate refuses it (`sampling_shift`), but a resume
    went on with the checkpoint scheduler's 5.0 without a word about the run's own. It now stops naming --shift,
    and goes on with the number given."""
    from policy.rollout import RolloutConfigError
    from training.sampler_shift import sampling_shift

    cfg = _resumed(tmp_path, "null")
    with pytest.raises(RolloutConfigError):  # what generate says of that config
        sampling_shift(dataclasses.replace(cfg, shift=None))
    with pytest.raises(ConfigError, match=r"config.yaml holds shift: None.*pass --shift N"):
        resolve_shift(cfg)
    assert resolve_shift(dataclasses.replace(cfg, shift=3.0))[0].shift == 3.0


@pytest.mark.parametrize(("saved", "why"), [(None, "config.yaml does not exist"),
                                            ("unreadable", "config.yaml cannot be read")])
def test_a_resume_without_a_readable_saved_config_says_why_it_takes_the_checkpoints(tmp_path, saved, why):
    resolved, note = resolve_shift(_resumed(tmp_path, saved))
    assert resolved.shift == 5.0 and "scheduler" in note and "not the resumed run's: " in note and why in note


def test_a_resume_whose_saved_config_and_checkpoint_both_fail_says_both(tmp_path):
    """Neither the run's config.yaml nor the checkpoint's scheduler config reads: the refusal named only the
    checkpoint, so the user was not told that the run's own saved shift was looked for first and why it failed."""
    cfg = _resumed(tmp_path, "unreadable")
    scheduler = Path(cfg.model_path) / "scheduler" / "scheduler_config.json"
    scheduler.write_text('{"flow_shift": 5.0,')  # cut short
    with pytest.raises(ConfigError, match=r"Pass --shift N") as info:
        resolve_shift(cfg)
    assert "not the resumed run's: " in str(info.value) and "config.yaml cannot be read" in str(info.value)
