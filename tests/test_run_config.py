"""A run's saved config (training/config_io.py: read_run_config; training/config_resume.py: config_changes, read_saved_run) and where it
is read: `python -m training.export --run`, and the warning a resumed launch prints."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from training.config_io import config_to_dict, load_config, read_run_config
from training.config_resume import config_changes, read_saved_run, resume_conflicts

SMOKE = Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml"


def _changes(path, cfg) -> list[str]:
    return read_saved_run(path, cfg).changes


def _saved(tmp_path: Path, drop: tuple[str, ...] = (), **over) -> Path:
    """A run folder's config.yaml as the trainer writes it, optionally without some fields (older code)."""
    data = {k: v for k, v in config_to_dict(load_config(SMOKE)).items() if k not in drop}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({**data, **over}, sort_keys=False))
    return path


def test_a_config_saved_before_image_fit_reads_as_stretch(tmp_path):
    assert read_run_config(_saved(tmp_path)).image_fit == "crop"  # saved with the field: as saved
    assert read_run_config(_saved(tmp_path, drop=("image_fit",))).image_fit == "stretch"
    # a user's own YAML without the field still gets the current default
    assert load_config(_saved(tmp_path, drop=("image_fit",))).image_fit == "crop"


def test_a_run_saved_before_prompt_order_resumes_with_a_note_and_can_keep_its_order(tmp_path):
    """A run saved before ``prompt_order`` drew its prompts in the ``seed_plus_epoch`` order: its config reads so,
    and a resume names the switch (``--prompt_order seed_plus_epoch`` keeps the order it was on)."""
    assert read_run_config(_saved(tmp_path)).prompt_order == "derived"
    path = _saved(tmp_path, drop=("prompt_order", "image_fit"), image_fit="crop")
    assert read_run_config(path).prompt_order == "seed_plus_epoch"
    assert _changes(path, load_config(SMOKE, ["--resume"])) == ["prompt_order: 'seed_plus_epoch' -> 'derived'"]
    assert _changes(path, load_config(SMOKE, ["--resume", "--prompt_order", "seed_plus_epoch"])) == []


def test_config_changes_lists_each_changed_field(tmp_path):
    saved = yaml.safe_load(_saved(tmp_path).read_text())
    cfg = load_config(SMOKE, ["--learning_rate", "3e-5", "--sde_window", "[0, 3]", "--resume", "--max_iterations",
                              "99", "--checkpoint_every", "7", "--progress", "false"])  # the last three: neutral
    assert sorted(config_changes(saved, cfg)) == [f"learning_rate: {saved['learning_rate']!r} -> 3e-05",
                                                  f"sde_window: {saved['sde_window']!r} -> [0, 3]"]  # not resume
    assert config_changes(saved, load_config(SMOKE)) == []


def test_a_resume_onto_a_run_saved_before_image_fit_names_the_switch_to_crop(tmp_path):
    path = _saved(tmp_path, drop=("image_fit", "guidance_scale"))  # guidance_scale: default = old behaviour
    assert _changes(path, load_config(SMOKE, ["--resume"])) == ["image_fit: 'stretch' -> 'crop'"]
    assert _changes(path, load_config(SMOKE, ["--resume", "--image_fit", "stretch"])) == []


def test_resume_changes_without_or_with_an_unreadable_saved_config(tmp_path):
    cfg = load_config(SMOKE)
    assert _changes(tmp_path / "missing.yaml", cfg) == []  # a first launch with --resume fails later
    bad = tmp_path / "config.yaml"
    bad.write_text("a: [unclosed")
    assert _changes(bad, cfg)[0].startswith(f"cannot list the changes: {bad}: not valid YAML (")
    bad.write_text("- a list")
    assert "top level must be a mapping" in _changes(bad, cfg)[0]
    path = _saved(tmp_path, old_field=1)  # saved by a version with a field this one lacks
    assert _changes(path, cfg) == ["old_field: 1 -> (no such field now)"]


def test_export_main_reads_the_run_config_as_trained(tmp_path, monkeypatch):
    """`python -m training.export --run RUN` rebuilds the config from RUN/config.yaml; one saved before
    image_fit must export a config that samples with stretched prompt images, as the policy was trained."""
    import training.export as export

    seen = {}

    def fake_export(cfg, out, *, checkpoint_dir, tag):  # noqa: ANN001, ANN202 (stands in for the weights)
        seen["cfg"] = cfg
        return out

    monkeypatch.setattr(export, "export_policy", fake_export)
    _saved(tmp_path, drop=("image_fit",))
    assert export.main(["--run", str(tmp_path)]) == 0
    assert seen["cfg"].image_fit == "stretch"
    assert export.main(["--run", str(tmp_path / "nowhere")]) == 2  # no config.yaml: named, exit 2


def test_resume_conflicts_are_the_changes_a_checkpoint_cannot_take(tmp_path):
    path = _saved(tmp_path, finetune="lora", lora_rank=4)

    def conflicts(path, cfg):
        return resume_conflicts(_changes(path, cfg), cfg)

    cfg = load_config(SMOKE, ["--finetune", "lora", "--lora_rank", "8", "--learning_rate", "3e-5"])
    assert conflicts(path, cfg) == ["lora_rank: 4 -> 8"]  # the learning rate may change
    assert len(_changes(path, cfg)) == 2
    assert conflicts(path, load_config(SMOKE, ["--finetune", "lora", "--lora_rank", "4"])) == []
    assert conflicts(path, load_config(SMOKE)) == ["finetune: 'lora' -> 'full'"]
    assert conflicts(tmp_path / "missing.yaml", cfg) == []


def test_a_resume_cannot_rescale_the_lora_adapter(tmp_path):
    """lora_alpha sets the adapter's scale (alpha / rank): changed on a resume it only warned, trained on at the
    new scale, and config.yaml (rewritten by every launch) made exports of earlier checkpoints merge their A and
    B at the new scale too (a merged delta doubled from 0.2976 to 0.5951)."""
    path = _saved(tmp_path, finetune="lora", lora_rank=4, lora_alpha=8.0)
    cfg = load_config(SMOKE, ["--finetune", "lora", "--lora_rank", "4", "--lora_alpha", "16"])
    assert resume_conflicts(_changes(path, cfg), cfg) == ["lora_alpha: 8.0 -> 16.0"]
    same = load_config(SMOKE, ["--finetune", "lora", "--lora_rank", "4", "--lora_alpha", "8"])
    assert resume_conflicts(_changes(path, same), same) == []


def test_config_yaml_stores_the_launch_files_as_absolute_paths(tmp_path, monkeypatch):
    """The trainer's config.yaml kept a relative dataset_file (relative to where the run was launched), so
    `training.export --run` from another directory wrote a wrong absolute path into export.json and `generate`
    failed with "prompt file not found". Every file setting is stored absolute; a hub id and a bundled
    DeepSpeed JSON stay as given, and a resume from the launch directory lists no change."""
    from training.config_io import write_run_config
    from training.data import load_prompts

    launch, run, elsewhere = tmp_path / "launch", tmp_path / "run", tmp_path / "elsewhere"
    for folder in (launch, run, elsewhere, launch / "data", launch / "model"):
        folder.mkdir(exist_ok=True)
    (launch / "data" / "train.jsonl").write_text('{"text": "stack the blocks", "image": "a.png"}\n')
    (launch / "data" / "eval.jsonl").write_text('{"text": "open the drawer"}\n')
    (launch / "my_ds.json").write_text((SMOKE.parent / "ds_zero2.json").read_text())
    monkeypatch.chdir(launch)
    args = ["--dataset_file", "data/train.jsonl", "--eval_dataset_file", "data/eval.jsonl", "--eval_every", "1",
            "--ds_config", "my_ds.json", "--dataset", "[{text: push, image: data/b.png}, {text: pull}]"]
    cfg = load_config(SMOKE, args)
    write_run_config(run, cfg)
    assert config_changes(yaml.safe_load((run / "config.yaml").read_text()), cfg) == []  # a resume from launch/
    hub = read_run_config(write_run_config(elsewhere, load_config(SMOKE, ["--model_path", "org/model"])))
    assert (hub.model_path, hub.ds_config) == ("org/model", "ds_zero2.json")  # a hub id, the bundled JSON
    write_run_config(run, load_config(SMOKE, [*args, "--model_path", "model"]))

    monkeypatch.chdir(elsewhere)
    saved = read_run_config(run / "config.yaml")
    assert saved.dataset_file == str(launch / "data" / "train.jsonl")
    assert saved.eval_dataset_file == str(launch / "data" / "eval.jsonl")
    assert saved.ds_config == str(launch / "my_ds.json") and saved.model_path == str(launch / "model")
    assert [p.image for p in saved.dataset] == [str(launch / "data" / "b.png"), None]
    prompts = load_prompts(saved.dataset, saved.dataset_file)  # what generate reads by default
    assert prompts[-1].image == str(launch / "data" / "a.png")


def test_a_resume_is_not_warned_or_refused_for_changes_that_change_nothing(tmp_path):
    """Before: lora_targets in another order was a conflict (exit 2), a tiny run's model_path likewise (tiny
    reads no model_path), and output_dir spelled relative instead of absolute warned."""
    path = _saved(tmp_path, finetune="lora", lora_targets=["to_q", "to_k"], model_path="/models/a",
                  output_dir=str(tmp_path / "run"))
    cfg = load_config(SMOKE, ["--finetune", "lora", "--lora_targets", "[to_k, to_q]", "--model_path", "/models/b",
                              "--output_dir", "run", "--resume"])
    assert cfg.tiny
    assert _changes(path, cfg) == [] and resume_conflicts(_changes(path, cfg), cfg) == []
    other = load_config(SMOKE, ["--finetune", "lora", "--lora_targets", "[to_q]", "--model_path", "/models/a"])
    assert resume_conflicts(_changes(path, other), other) == ["lora_targets: ['to_q', 'to_k'] -> ['to_q']"]


def test_a_launch_that_cannot_write_config_yaml_leaves_the_runs_config(tmp_path, monkeypatch):
    """Every launch rewrites config.yaml, and it was written in place: a full disk (checkpoints fill it) or a
    kill part-way left it empty or cut short. The next resume then compared itself with the defaults and was
    refused ('tiny: False -> True', another model), and `training.export --run` read the defaults too."""
    import errno

    from training.config_io import write_run_config

    cfg = load_config(SMOKE, ["--finetune", "lora", "--lora_rank", "4", "--output_dir", str(tmp_path)])
    path = write_run_config(tmp_path, cfg)
    before = path.read_text()
    real = Path.write_text

    def disk_full(self, data, *args, **kwargs):
        real(self, data[:10], *args, **kwargs)  # what fitted
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", disk_full)
    try:
        write_run_config(tmp_path, load_config(SMOKE, ["--finetune", "lora", "--lora_rank", "4", "--resume",
                                                        "--output_dir", str(tmp_path)]))
    except OSError:
        pass
    monkeypatch.setattr(Path, "write_text", real)
    assert path.read_text() == before
    resumed = load_config(SMOKE, ["--finetune", "lora", "--lora_rank", "4", "--resume", "--output_dir", str(tmp_path)])
    assert resume_conflicts(_changes(path, resumed), resumed) == []
    assert not [p.name for p in tmp_path.iterdir() if p.name != "config.yaml"]  # no temporary file left


def test_a_run_saved_with_a_clip_range_now_refused_still_reads_but_no_launch_takes_it(tmp_path, monkeypatch):
    """clip_range >= 1 (finite) is refused since it clips only from above; a run trained with one before must
    still export, generate and list a resume's changes with the value it trained with, while a launch (a new
    run, or a resume that keeps the value) is refused naming the field."""
    import pytest

    import training.export as export
    from training.config import ConfigError
    from training.export_folder import read_export, save_policy
    from training.models import build_world_model

    path = _saved(tmp_path, clip_range=2.0)
    assert read_run_config(path).clip_range == 2.0
    monkeypatch.setattr(export, "export_policy", lambda cfg, out, **_: out)
    assert export.main(["--run", str(tmp_path)]) == 0
    saved = read_saved_run(path, load_config(SMOKE, ["--resume"]))
    assert saved.config is not None and saved.config.clip_range == 2.0
    assert [c for c in saved.changes if c.startswith("clip_range")] == [
        f"clip_range: 2.0 -> {load_config(SMOKE).clip_range!r}"]
    for launch in (lambda: load_config(path), lambda: load_config(path, ["--resume"]),
                   lambda: load_config(SMOKE, ["--clip_range", "2"])):
        with pytest.raises(ConfigError, match="clip_range must be below 1"):
            launch()
    cfg = load_config(SMOKE)
    out = save_policy(build_world_model(cfg, "cpu"), cfg, tmp_path / "final", iteration=1, source="unit")
    info = json.loads((out / "export.json").read_text())
    (out / "export.json").write_text(json.dumps({**info, "config": {**info["config"], "clip_range": 2.0}}))
    assert read_export(out)[1].clip_range == 2.0  # what generate reads


def test_a_run_saved_with_an_empty_output_dir_still_exports(tmp_path):
    """With OUT unset, ``--output_dir "$OUT"`` trained into the current directory before an empty output_dir was
    refused; that run's config.yaml (output_dir '') must still read for its export, while a launch is refused."""
    import pytest

    from training.config import ConfigError

    path = _saved(tmp_path, output_dir="")
    assert read_run_config(path).output_dir == ""
    with pytest.raises(ConfigError, match="output_dir must name a folder"):
        load_config(path)
