"""`raa doctor`'s V-JEPA 2 check reads the weight names a folder (or the Hugging Face cache) holds, without loading
the model: a checkpoint that lacks weights of the model (an encoder-only export without the predictor) is the
problem the surprise loader faults on (`tools.surprise.missing_weights_problem`), with the same explanation."""

from __future__ import annotations

import json

import pytest

from graph.doctor_tools import vjepa_check
from tests.vjepa_files import save_tiny_vjepa
from tools.errors import ToolFault
from tools.settings import ToolSettings
from tools.surprise import VJEPA2SurpriseScorer


def test_a_folder_without_the_predictor_weights_is_the_problem_the_loader_faults_on(tmp_path):
    """It was "ok" (config.json and model.safetensors exist), and every WMReward run then stopped at load."""
    folder = save_tiny_vjepa(tmp_path / "vjepa2", drop_prefix="predictor.")
    check = vjepa_check(ToolSettings(vjepa_model=str(folder)))
    assert check.status == "problem", check
    with pytest.raises(ToolFault) as fault:
        VJEPA2SurpriseScorer.from_pretrained(str(folder)).load()
    explanation = fault.value.message.split("ValueError: ", 1)[1]  # missing_weights_problem's text
    assert explanation in check.detail and "predictor." in check.detail, (check.detail, explanation)


def test_a_whole_checkpoint_passes_and_a_sharded_one_is_read_from_its_index(tmp_path):
    folder = save_tiny_vjepa(tmp_path / "vjepa2")
    assert vjepa_check(ToolSettings(vjepa_model=str(folder))).status == "ok"
    # an index whose weight_map lacks the predictor: the same problem, no shard opened
    from safetensors import safe_open

    with safe_open(folder / "model.safetensors", "pt") as f:
        names = [k for k in f.keys() if not k.startswith("predictor.")]
    (folder / "model.safetensors").rename(folder / "model-00001-of-00001.safetensors")
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {k: "model-00001-of-00001.safetensors" for k in names}}))
    check = vjepa_check(ToolSettings(vjepa_model=str(folder)))
    assert check.status == "problem" and "missing" in check.detail and "predictor." in check.detail, check


def test_an_unreadable_safetensors_file_is_a_problem(tmp_path):
    folder = save_tiny_vjepa(tmp_path / "vjepa2")
    (folder / "model.safetensors").write_bytes(b"not safetensors")
    check = vjepa_check(ToolSettings(vjepa_model=str(folder)))
    assert check.status == "problem" and "model.safetensors" in check.detail, check


def test_a_cached_hub_model_without_the_predictor_is_a_problem_not_a_download(tmp_path, monkeypatch):
    """Every file is in the cache, so nothing is downloaded: the missing weights stay missing."""
    import huggingface_hub

    folder = save_tiny_vjepa(tmp_path / "vjepa2", drop_prefix="predictor.")
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache",
                        lambda repo, name, **kw: str(folder / name) if (folder / name).is_file() else None)
    check = vjepa_check(ToolSettings(vjepa_model="facebook/vjepa2-vitl-fpc64-256"))
    assert check.status == "problem" and "predictor." in check.detail, check
