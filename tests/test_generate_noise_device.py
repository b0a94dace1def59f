"""The noise of a video depends on the device its generator draws on (torch's CPU and CUDA generators give other
numbers for one seed), so ``generate.json`` and each manifest row record it, and a resume on the other device is
refused instead of mixing two noise streams in one manifest (training/generate.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training.config import PromptSpec
from training.config_io import load_config
from training.export_folder import save_policy
from training.generate import GenerateError, generate
from training.models import build_world_model

SMOKE = Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml"


@pytest.fixture
def policy(tmp_path) -> Path:
    cfg = load_config(SMOKE, ["--num_steps", "2", "--sde_window", "[0, 1]"])
    return save_policy(build_world_model(cfg, "cpu"), cfg, tmp_path / "final", iteration=4, source="unit")


def test_the_noise_device_is_recorded_and_a_resume_on_another_is_refused(policy, tmp_path):
    out = tmp_path / "gen"
    prompts = [PromptSpec("open the drawer", image_seed=3)]
    assert generate(policy, out, prompts=prompts, device="cpu").written == 1
    settings = json.loads((out / "generate.json").read_text())
    assert settings["noise_device"] == "cpu"
    assert json.loads((out / "manifest.jsonl").read_text().splitlines()[0])["noise_device"] == "cpu"
    settings["noise_device"] = "cuda"  # the first videos were drawn on a GPU
    (out / "generate.json").write_text(json.dumps(settings))
    with pytest.raises(GenerateError, match="noise_device 'cuda' -> 'cpu'"):
        generate(policy, out, prompts=prompts, samples=2, device="cpu")


def test_a_folder_from_before_the_record_still_resumes(policy, tmp_path):
    """generate.json without noise_device (written before it was recorded) is not refused for lacking it."""
    out = tmp_path / "gen"
    prompts = [PromptSpec("open the drawer", image_seed=3)]
    generate(policy, out, prompts=prompts, device="cpu")
    settings = json.loads((out / "generate.json").read_text())
    del settings["noise_device"]
    (out / "generate.json").write_text(json.dumps(settings))
    summary = generate(policy, out, prompts=prompts, device="cpu")
    assert (summary.written, summary.skipped) == (0, 1)
