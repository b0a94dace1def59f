"""save_policy's clean-up of what a killed export left (training/export_folder.py `_tidy_killed`) touches only the hidden
folders of its own output, not those of another output whose name starts with the same word."""

from __future__ import annotations

from pathlib import Path

from training.config_io import load_config
from training.export_folder import read_export, save_policy
from training.models import build_world_model

SMOKE = Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml"


def test_an_export_leaves_the_folders_of_an_output_named_like_it_alone(tmp_path):
    """Exporting into best/ globbed `.best-*`: it moved best-lora/'s earlier export, set aside by a killed export,
    into best/ (then replaced and deleted it) and deleted best-lora/'s work folder, so the next export into
    best-lora/ had nothing to restore (and a concurrent one lost its folder)."""
    cfg = load_config(SMOKE)
    model = build_world_model(cfg, "cpu")
    aside = save_policy(model, cfg, tmp_path / "best-lora", iteration=4, source="unit").rename(
        tmp_path / ".best-lora-k2j3h4g5-old")  # killed between moving it aside and moving the new one in
    work = tmp_path / ".best-lora-q1w2e3r4"
    work.mkdir()
    assert read_export(save_policy(model, cfg, tmp_path / "best", iteration=9, source="unit"))[0]["iteration"] == 9
    assert aside.is_dir() and work.is_dir()
    assert read_export(save_policy(model, cfg, tmp_path / "best-lora", iteration=5, source="unit"))[0]["iteration"] == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best", "best-lora"]  # its own leftovers went with it
