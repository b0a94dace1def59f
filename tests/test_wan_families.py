"""Which Wan family a checkpoint is, and what follows from it (policy/wan_i2v.py, policy/world_model.py): the
clip length a model generates when none is given, and the refusal of a text-to-video checkpoint. Tiny random
folders of the real classes (WanTransformer3DModel, CosmosTransformer3DModel, AutoencoderKLWan); no hub."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest
import torch

from policy.cosmos import TINY_COSMOS, build_cosmos_transformer
from policy.vae import tiny_wan_vae
from policy.wan import TINY_WAN, build_wan_transformer
from policy.world_model import FlowWorldModel
from tests.fake_loaders import recording_loader

SMOKE = str(Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml")
I2V_14B = {**TINY_WAN, "in_channels": 36, "out_channels": 16, "image_dim": 32, "added_kv_proj_dim": 32}
# what diffusers' scripts/convert_wan_to_diffusers.py writes: Wan 2.1 T2V a plain WanPipeline, TI2V-5B with
# expand_timesteps=True (older conversions of Wan 2.1 T2V have no expand_timesteps key at all)
T2V_INDEX = {"_class_name": "WanPipeline", "_diffusers_version": "0.33.0.dev0",
             "transformer": ["diffusers", "WanTransformer3DModel"], "vae": ["diffusers", "AutoencoderKLWan"]}
TI2V_INDEX = {**T2V_INDEX, "boundary_ratio": None, "expand_timesteps": True, "transformer_2": [None, None]}


def _folder(root: Path, config: dict, index: dict | None = None, backend: str = "wan") -> Path:
    build = build_wan_transformer if backend == "wan" else build_cosmos_transformer
    build(config, seed=1).save_pretrained(root / "transformer")
    tiny_wan_vae(seed=1).save_pretrained(root / "vae")
    if index is not None:
        (root / "model_index.json").write_text(json.dumps(index))
    for part in ("text_encoder", "tokenizer"):  # the launch check's stand-ins (nothing here loads them)
        (root / part).mkdir()
    (root / "text_encoder" / "config.json").write_text("{}")
    (root / "text_encoder" / "model.safetensors").write_bytes(b"")
    return root


def _load(root: Path, backend: str = "wan") -> FlowWorldModel:
    return FlowWorldModel.from_pretrained(root, backend, torch_dtype=torch.float32, load_text_encoder=False)


@pytest.mark.parametrize(("backend", "config", "frames"), [
    ("wan", TINY_WAN, 121),  # Wan 2.2 TI2V-5B: the model's own 5 s at 24 fps (upstream ti2v_5B frame_num 121)
    ("wan", I2V_14B, 81),  # Wan 2.1 I2V-14B: WanImageToVideoPipeline's num_frames default, its 5 s at 16 fps
    ("cosmos", TINY_COSMOS, 93),  # Cosmos2_5_PredictBasePipeline's num_frames default
])
def test_the_default_clip_length_is_the_family_s_own(tmp_path, backend, config, frames):
    """Before: from_pretrained gave every Wan model 121 frames (Wan 2.1 I2V-14B was trained on, and its pipeline
    defaults to, 81), and the constructor 93 (Cosmos') to any backend."""
    root = _folder(tmp_path / "m", config, TI2V_INDEX if config is TINY_WAN else None, backend)
    assert _load(root, backend).default_num_frames == frames
    build = build_wan_transformer if backend == "wan" else build_cosmos_transformer
    assert FlowWorldModel(backend, build(config)).default_num_frames == frames
    assert FlowWorldModel(backend, build(config), default_num_frames=9).default_num_frames == 9


@pytest.mark.parametrize("index", [T2V_INDEX, {**T2V_INDEX, "expand_timesteps": False}])
def test_a_wan_text_to_video_checkpoint_is_refused(tmp_path, index):
    """Before: Wan 2.1 T2V (in_channels = out_channels = the VAE's z_dim, no image branch) passed as the TI2V
    layout: the trainer pinned a first-frame latent the model was never trained to continue (per-token
    timestep 0 on frame 0), and every rollout was a text-to-video model's output with a pasted first frame."""
    from training.config import ConfigError
    from training.config_io import load_config
    from training.model_check import check_model_path

    root = _folder(tmp_path / "t2v", TINY_WAN, index)
    found = "expand_timesteps false" if "expand_timesteps" in index else "no expand_timesteps"
    with pytest.raises(ValueError, match=rf"text-to-video checkpoint: .*WanPipeline.*{found}.*Wan 2.2 TI2V"):
        _load(root)
    cfg = load_config(SMOKE, ["--tiny", "false", "--model_path", str(root), "--backend", "wan"])
    with pytest.raises(ConfigError, match=rf"text-to-video checkpoint: .*{found}"):
        check_model_path(cfg)


def test_a_ti2v_checkpoint_and_a_folder_without_model_index_still_load(tmp_path):
    from training.config_io import load_config
    from training.model_check import check_model_path

    for name, index in (("ti2v", TI2V_INDEX), ("bare", None)):
        root = _folder(tmp_path / name, TINY_WAN, index)
        assert _load(root).transformer.config.in_channels == TINY_WAN["in_channels"]
        assert check_model_path(load_config(SMOKE, ["--tiny", "false", "--model_path", str(root),
                                                    "--backend", "wan"])) is None


def test_a_hub_text_to_video_checkpoint_is_refused_before_its_weights_load(monkeypatch):
    """A hub id's model_index.json is read (at its revision) like a folder's, before any weights load."""
    import diffusers

    seen: dict[str, dict] = {}

    fake = partial(recording_loader, seen)

    def no_load(*_args, **_kwargs):
        raise AssertionError("loaded weights of a refused checkpoint")

    tiny = build_wan_transformer(TINY_WAN)
    monkeypatch.setattr(diffusers.WanTransformer3DModel, "load_config", fake("config", dict(tiny.config)))
    monkeypatch.setattr(diffusers.DiffusionPipeline, "load_config", fake("index", dict(T2V_INDEX)))
    monkeypatch.setattr(diffusers.WanTransformer3DModel, "from_pretrained", no_load)
    with pytest.raises(ValueError, match="text-to-video checkpoint"):
        FlowWorldModel.from_pretrained("org/wan-t2v", "wan", load_text_encoder=False, revision="r1")
    assert seen["index"]["path"] == "org/wan-t2v" and seen["index"]["revision"] == "r1"
