"""Wan 2.1 I2V-14B layout (policy/wan_i2v.py): a tiny random folder of the real classes (WanTransformer3DModel with
in_channels 36 and image_dim, AutoencoderKLWan, CLIPVisionModel) loaded through from_pretrained. Before: refused by
the launch check, and the loaded transformer failed at its first call (16 channels fed to a 36-channel patch
embedding). No hub, no network."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from policy.rollout import RolloutConfig, rollout, step_log_prob
from policy.text import HashTextEncoder
from policy.vae import tiny_wan_vae
from policy.wan import TINY_WAN, build_wan_transformer
from policy.world_model import FlowWorldModel
from training.update import take

SMOKE = str(Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml")
I2V = {**TINY_WAN, "in_channels": 36, "out_channels": 16, "image_dim": 32, "added_kv_proj_dim": 32}
PROCESSOR = {"image_processor_type": "CLIPImageProcessor", "size": {"shortest_edge": 32},
             "crop_size": {"height": 32, "width": 32}, "image_mean": [0.48145466, 0.4578275, 0.40821073],
             "image_std": [0.26862954, 0.26130258, 0.27577711], "do_resize": True, "do_center_crop": True}


def _folder(root: Path, clip: bool = True) -> Path:
    from transformers import CLIPVisionConfig, CLIPVisionModel

    config = I2V if clip else {**I2V, "image_dim": None, "added_kv_proj_dim": None}
    build_wan_transformer(config, seed=1).save_pretrained(root / "transformer")
    tiny_wan_vae(seed=1).save_pretrained(root / "vae")
    if clip:
        torch.manual_seed(2)
        CLIPVisionModel(CLIPVisionConfig(hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                                         num_attention_heads=2, image_size=32, patch_size=8)
                        ).save_pretrained(root / "image_encoder")
        (root / "image_processor").mkdir()
        (root / "image_processor" / "preprocessor_config.json").write_text(json.dumps(PROCESSOR))
    for part in ("text_encoder", "tokenizer"):  # the launch check's stand-ins (the test attaches a hash encoder)
        (root / part).mkdir()
    (root / "text_encoder" / "config.json").write_text("{}")
    (root / "text_encoder" / "model.safetensors").write_bytes(b"")
    return root


def _load(root: Path) -> FlowWorldModel:
    model = FlowWorldModel.from_pretrained(root, "wan", torch_dtype=torch.float32, load_text_encoder=False,
                                           load_image_encoder=True, default_num_frames=9)
    model._frozen["text_encoder"] = HashTextEncoder(seq_len=8, dim=24)
    return model


def _images(seed: int = 0, n: int = 2) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)


def test_an_i2v_14b_folder_loads_and_its_update_recomputes_the_rollout_log_prob(tmp_path):
    model = _load(_folder(tmp_path))
    assert model.image_encoder is not None
    cond = model.encode_prompts(_images(), ["a cat", "a dog"]).repeat_interleave(2)
    assert cond.image_condition.shape == (4, 4 + 16, 3, 4, 4)
    mask = cond.image_condition[:, :4]
    assert torch.equal(mask[:, :, 0], torch.ones_like(mask[:, :, 0])) and not mask[:, :, 1:].any()
    assert cond.image_embeds.shape == (4, 17, 32)  # 16 patches + CLS, CLIP's penultimate hidden states
    cfg = RolloutConfig(num_steps=4, sde_window=(0, 3))
    with torch.no_grad():
        ro = rollout(model, cond, cfg, generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(ro.latents).all()
    rows = torch.tensor([3, 1])
    for record in ro.steps:  # the update's micro-batch selection (training.update.take / Conditioning.select)
        with torch.no_grad():
            log_prob, _, _, _ = step_log_prob(model, cond.select(rows), take(record, rows, 4), cfg)
        torch.testing.assert_close(log_prob, record.log_prob[rows].to(log_prob.dtype), rtol=1e-12, atol=0)


def test_the_image_condition_and_the_clip_embeddings_reach_the_transformer(tmp_path):
    model = _load(_folder(tmp_path))
    cond = model.encode_prompts(_images(), ["a cat", "a cat"])
    x = torch.randn(2, 16, 3, 4, 4, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        v = model.velocity(x, 0.7, cond)
        other = model.encode_prompts(_images(seed=9), ["a cat", "a cat"])
        v_image = model.velocity(x, 0.7, type(cond)(**{**vars(cond), "image_condition": other.image_condition}))
        v_clip = model.velocity(x, 0.7, type(cond)(**{**vars(cond), "image_embeds": other.image_embeds}))
    assert not torch.allclose(v, v_image) and not torch.allclose(v, v_clip)
    with torch.no_grad():  # the pipeline's call: cat([latents, condition]), one timestep per sample, image embeds
        x_in = torch.cat([cond.first_frame_latent, x[:, :, 1:]], dim=2)
        pipe = model.transformer(torch.cat([x_in, cond.image_condition], dim=1), torch.full((2,), 700.0),
                                 cond.text_embeds, encoder_hidden_states_image=cond.image_embeds, return_dict=False)[0]
    torch.testing.assert_close(v[:, :, 1:], pipe[:, :, 1:])
    assert not v[:, :, 0].any()  # the conditioning frame: velocity 0 (the project's convention, module docstring)
    with pytest.raises(ValueError, match="needs CLIP image embeddings exactly when it is set"):
        model.velocity(x, 0.7, type(cond)(**{**vars(cond), "image_embeds": None}))


def test_the_launch_check_accepts_an_i2v_14b_folder_and_names_what_it_lacks(tmp_path):
    from training.config import ConfigError
    from training.config_io import load_config
    from training.model_check import check_model_path

    root = _folder(tmp_path / "wan")
    cfg = load_config(SMOKE, ["--tiny", "false", "--model_path", str(root), "--backend", "wan"])
    assert check_model_path(cfg) is None
    (root / "image_encoder" / "config.json").unlink()
    with pytest.raises(ConfigError, match=r"image_dim 32 \(Wan 2.1 I2V's CLIP branch\) needs image_encoder/config"):
        check_model_path(cfg)


def test_wan_2_2_a14b_two_experts_are_refused(tmp_path):
    from training.config import ConfigError
    from training.config_io import load_config
    from training.model_check import check_model_path

    root = _folder(tmp_path / "wan", clip=False)  # Wan 2.2 A14B: 36 channels, no CLIP branch, two experts
    (root / "model_index.json").write_text(json.dumps({"boundary_ratio": 0.9, "transformer_2": ["diffusers", "X"]}))
    cfg = load_config(SMOKE, ["--tiny", "false", "--model_path", str(root), "--backend", "wan"])
    with pytest.raises(ConfigError, match=r"Wan 2.2 A14B's two experts \(transformer_2, boundary_ratio 0.9\)"):
        check_model_path(cfg)
    with pytest.raises(ValueError, match="Wan 2.2 A14B's two experts"):
        FlowWorldModel.from_pretrained(root, "wan", torch_dtype=torch.float32, load_text_encoder=False)


def test_a_wan_2_2_a14b_expert_folder_without_model_index_is_refused_by_its_transformer_config(tmp_path):
    """Before: without model_index.json and transformer_2/ (one expert copied out, or a folder of the transformer
    and the VAE only) the I2V layout without a CLIP branch passed as Wan 2.1 I2V and trained one expert alone.
    Wan 2.1 I2V-14B always has image_dim (1280, CLIP ViT-H); Wan 2.2 A14B's experts have none, which its
    transformer config alone tells (diffusers' scripts/convert_wan_to_diffusers.py)."""
    from training.config import ConfigError
    from training.config_io import load_config
    from training.model_check import check_model_path

    root = _folder(tmp_path / "wan", clip=False)
    assert not (root / "model_index.json").exists() and not (root / "transformer_2").exists()
    cfg = load_config(SMOKE, ["--tiny", "false", "--model_path", str(root), "--backend", "wan"])
    with pytest.raises(ConfigError, match=r"no CLIP branch \(image_dim null\): a Wan 2.2 A14B expert"):
        check_model_path(cfg)
    with pytest.raises(ValueError, match="a Wan 2.2 A14B expert"):
        FlowWorldModel.from_pretrained(root, "wan", torch_dtype=torch.float32, load_text_encoder=False)


def test_the_launch_check_refuses_an_a14b_expert_whose_vae_z_dim_it_cannot_read(tmp_path):
    """The loader refuses the expert layout from the transformer config alone; the launch check flagged it only
    where the VAE config confirmed the I2V channel layout, so with the VAE's z_dim unreadable (a string here)
    ``--check`` passed and every rank's load then refused the folder."""
    from training.config import ConfigError
    from training.config_io import load_config
    from training.model_check import check_model_path

    root = _folder(tmp_path / "wan", clip=False)
    vae_config = root / "vae" / "config.json"
    vae_config.write_text(json.dumps({**json.loads(vae_config.read_text()), "z_dim": "16"}))
    cfg = load_config(SMOKE, ["--tiny", "false", "--model_path", str(root), "--backend", "wan"])
    with pytest.raises(ConfigError, match=r"no CLIP branch \(image_dim null\): a Wan 2.2 A14B expert"):
        check_model_path(cfg)
    with pytest.raises(ValueError, match="a Wan 2.2 A14B expert"):
        FlowWorldModel.from_pretrained(root, "wan", torch_dtype=torch.float32, load_text_encoder=False)


def test_clip_preprocessing_is_close_to_the_pipeline_processor():
    """The torch preprocessing against transformers' CLIPImageProcessor (PIL): equal up to resize rounding."""
    from transformers import CLIPImageProcessor

    from policy.wan_i2v import ClipImageEncoder

    images = _images(n=1)
    images = np.repeat(np.repeat(images, 2, axis=1), 3, axis=2)[:, :48, :]  # 64 x 96 -> resize + crop
    ours = ClipImageEncoder(torch.nn.Linear(1, 1), PROCESSOR).preprocess(images)
    theirs = CLIPImageProcessor(**PROCESSOR).preprocess(list(images), return_tensors="pt")["pixel_values"]
    assert ours.shape == theirs.shape == (1, 3, 32, 32)
    assert (ours - theirs).abs().mean() < 0.05


def _record_moves(model: FlowWorldModel, log: list[str]) -> None:
    """Log the CLIP encoder's moves and encodes, and the text encoder's moves, in order (on CPU every place is
    one device, so where each was sent, and when, is what a test can see)."""
    clip, text = model.image_encoder, model.text_encoder
    clip_to, clip_encode, text_to = clip.to, clip.encode, text.to
    clip.to = lambda *a, **k: log.append(f"clip to {k.get('device', a[0] if a else '')}") or clip_to(*a, **k)
    clip.encode = lambda *a, **k: log.append("clip encode") or clip_encode(*a, **k)
    text.to = lambda *a, **k: log.append(f"text to {k.get('device', a[0] if a else '')}") or text_to(*a, **k)


def test_the_clip_encoder_moves_with_an_offloaded_text_encoder(tmp_path):
    """Before: ``text_encoder: offload`` built the model without moving the CLIP encoder (nn.Module.to skips the
    frozen helpers) and `text_encoder_on` moved only the text encoder, so CLIP ran in host memory, on the CPU, on
    every encode, and its features were not those of a resident run. Now it follows the text encoder: in for the
    encodes, out after them; with "resident" it is never moved."""
    from training.config_io import load_config
    from training.models import text_encoder_on

    model = _load(_folder(tmp_path))
    log: list[str] = []
    _record_moves(model, log)
    for mode, expected in (("offload", ["text to cpu", "clip to cpu", "clip encode", "text to cpu", "clip to cpu"]),
                           ("resident", ["clip encode"])):
        cfg = load_config(SMOKE, ["--text_encoder", mode])
        log.clear()
        with text_encoder_on(model, cfg, "cpu"):
            model.encode_prompts(_images(n=1), ["a cat"])
        assert log == expected, mode


def test_generate_moves_the_clip_encoder_off_the_device_after_every_prompt_is_encoded(tmp_path):
    """Sampling never needs CLIP: `training.generate.encode_all` releases it with the text encoder (before: it
    stayed on the device through sampling and decoding)."""
    from training.config import PromptSpec
    from training.config_io import load_config
    from training.generate import encode_all

    model = _load(_folder(tmp_path))
    log: list[str] = []
    _record_moves(model, log)
    cfg = load_config(SMOKE, [])
    conds = encode_all(model, cfg, {0: PromptSpec("a cat", image_seed=1), 1: PromptSpec("a dog", image_seed=2)},
                       None, "cpu")
    assert all(c.image_embeds is not None for c in conds.values())
    assert log == ["clip encode", "clip encode", "text to cpu", "clip to cpu"]


def test_the_launch_check_names_missing_clip_parts_whose_vae_z_dim_it_cannot_read(tmp_path):
    """The loader checks the CLIP parts whenever the transformer has ``image_dim``; the launch check did only where
    the VAE config confirmed the I2V channel layout, so with the VAE's z_dim unreadable (a string here) a folder
    without ``image_encoder/config.json`` passed ``--check`` and every rank's load then refused it."""
    from training.config import ConfigError
    from training.config_io import load_config
    from training.model_check import check_model_path

    root = _folder(tmp_path / "wan")
    vae_config = root / "vae" / "config.json"
    vae_config.write_text(json.dumps({**json.loads(vae_config.read_text()), "z_dim": "16"}))
    (root / "image_encoder" / "config.json").unlink()
    cfg = load_config(SMOKE, ["--tiny", "false", "--model_path", str(root), "--backend", "wan"])
    with pytest.raises(ConfigError, match=r"image_dim 32 \(Wan 2.1 I2V's CLIP branch\) needs image_encoder/config"):
        check_model_path(cfg)
    with pytest.raises(FileNotFoundError, match="lacks image_encoder/config.json"):
        _load(root)


@pytest.mark.parametrize(("remove", "named"), [
    ("image_encoder/model.safetensors", "image_encoder/ has no weights"),
    ("image_encoder/config.json", "image_encoder/config.json"),
    ("image_processor/preprocessor_config.json", "image_processor/preprocessor_config.json"),
])
def test_a_missing_clip_part_is_named_before_the_transformer_loads(tmp_path, monkeypatch, remove, named):
    """Before: the CLIP encoder loaded last, after the transformer, the VAE and the text encoder, and a missing
    part failed there as "no file named model.safetensors ... in directory ROOT" or transformers' "Can't load
    image processor for ROOT. If you were trying to load it from 'https://huggingface.co/models' ..."."""
    import diffusers

    root = _folder(tmp_path / "wan")
    (root / remove).unlink()

    def no_load(*_args, **_kwargs):
        raise AssertionError("loaded the transformer before the CLIP parts were checked")

    monkeypatch.setattr(diffusers.WanTransformer3DModel, "from_pretrained", no_load)
    with pytest.raises(FileNotFoundError, match=rf"{root}.* lacks .*{named}.*Wan 2.1 I2V's CLIP"):
        _load(root)


@pytest.mark.parametrize(("remove", "named"), [
    ("image_encoder/model.safetensors", "needs image_encoder weights (image_encoder/ has no weights"),
    ("image_processor/preprocessor_config.json", "needs image_processor/preprocessor_config.json"),
])
def test_the_launch_check_names_the_clip_files_the_loader_needs(tmp_path, remove, named):
    """Before: the launch check asked for image_encoder/config.json and an image_processor/ folder only, so a
    folder without the CLIP weights or the processor config passed and every rank failed after loading."""
    from training.config import ConfigError
    from training.config_io import load_config
    from training.model_check import check_model_path

    root = _folder(tmp_path / "wan")
    (root / remove).unlink()
    cfg = load_config(SMOKE, ["--tiny", "false", "--model_path", str(root), "--backend", "wan"])
    with pytest.raises(ConfigError, match=re.escape(f"image_dim 32 (Wan 2.1 I2V's CLIP branch) {named}")):
        check_model_path(cfg)
