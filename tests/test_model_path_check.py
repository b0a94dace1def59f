"""``model_path`` is checked before any model loads (training/model_check.py): ``--check`` passed a folder that
did not exist and the launch died a minute later in every rank with a loader traceback. The "hub" is a closed
local port or a local HTTP server: no test touches the network."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.test_hub import CLOSED, answering_hub

ROOT = Path(__file__).resolve().parents[1]
SMOKE = str(ROOT / "training" / "configs" / "smoke.yaml")
WEIGHT = "model.safetensors"


def _check(tmp_path, model_path: str) -> int:
    from training.train import main

    return main(["--config", SMOKE, "--output_dir", str(tmp_path / "run"), "--tiny", "false",
                 "--model_path", model_path, "--check"])


def _checkpoint(root: Path, skip: str = "") -> Path:
    """A diffusers-layout folder with the files the loader reads first and empty weight files (nothing loads)."""
    for part in ("transformer", "vae", "text_encoder", "tokenizer"):
        if part != skip:
            (root / part).mkdir(parents=True)
            (root / part / "config.json").write_text("{}")
            if part != "tokenizer":
                (root / part / WEIGHT).write_bytes(b"")
    return root


@pytest.fixture
def online(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # tests/conftest.py sets HF_HUB_OFFLINE=1
    monkeypatch.setattr(constants, "HF_HUB_CACHE", "/nonexistent-hf-cache")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    return constants


def test_a_folder_without_a_part_the_loader_reads_is_named(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    model = _checkpoint(tmp_path / "cosmos", skip="vae")
    assert _check(tmp_path, str(model)) == 2
    err = capsys.readouterr().err
    assert f"model_path {model}: missing vae/config.json" in err and "Traceback" not in err
    (model / "vae").mkdir()
    (model / "vae" / "config.json").write_text("{}")
    (model / "vae" / WEIGHT).write_bytes(b"")
    assert _check(tmp_path, str(model)) == 0
    assert "check: ok" in capsys.readouterr().out
    shutil.rmtree(model / "tokenizer")
    assert _check(tmp_path, str(model)) == 2 and "missing tokenizer/" in capsys.readouterr().err


def test_a_missing_path_the_hub_cannot_give_is_exit_2(tmp_path, capsys, online, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(online, "ENDPOINT", CLOSED)
    assert _check(tmp_path, "checkpoints/cosmos-predict2.5-2b") == 2
    err = capsys.readouterr().err
    assert "model_path checkpoints/cosmos-predict2.5-2b is not a folder" in err
    assert "not in the Hugging Face cache, and the hub did not answer" in err
    monkeypatch.setattr(online, "HF_HUB_OFFLINE", True)  # no request: the loader would not ask either
    assert _check(tmp_path, "checkpoints/cosmos-predict2.5-2b") == 2
    assert "HF_HUB_OFFLINE is set" in capsys.readouterr().err
    assert _check(tmp_path, str(tmp_path / "no" / "such")) == 2  # an absolute path is no hub id
    assert "is not a folder" in capsys.readouterr().err


def test_a_hub_id_is_fine_when_cached_or_when_the_hub_answers(tmp_path, capsys, online, monkeypatch):
    monkeypatch.setattr(online, "ENDPOINT", CLOSED)
    cache = tmp_path / "hf"
    repo = cache / "models--org--cosmos"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    _checkpoint(repo / "snapshots" / "abc123")
    monkeypatch.setattr(online, "HF_HUB_CACHE", str(cache))
    assert _check(tmp_path, "org/cosmos") == 0  # in the cache: no request (the hub is closed)
    assert "note:" not in capsys.readouterr().out

    with answering_hub(200) as url:
        monkeypatch.setattr(online, "ENDPOINT", url)
        assert _check(tmp_path, "org/other") == 0
    assert "note: model_path org/other is not a folder" in capsys.readouterr().out


def test_a_launch_stops_on_a_bad_model_path_before_loading_anything(tmp_path):
    """Without --check: exit 2 with the message, not a loader traceback in every rank."""
    model = _checkpoint(tmp_path / "cosmos", skip="text_encoder")
    from tests.launches import launch

    proc = launch([sys.executable, "-m", "training.train", "--config", SMOKE, "--output_dir", str(tmp_path / "run"),
                   "--tiny", "false", "--model_path", str(model)], timeout=120, what="training", cwd=ROOT)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"model_path {model}: missing text_encoder/config.json" in proc.stderr
    assert "Traceback" not in proc.stderr and "deepspeed" not in proc.stderr.lower()


def _cfg(model: Path, backend: str = "wan"):
    from training.config_io import load_config

    return load_config(SMOKE, ["--tiny", "false", "--model_path", str(model), "--backend", backend])


def _config_error(model: Path, backend: str = "wan", parts: str = "all") -> str:
    from training.config import ConfigError
    from training.model_check import check_model_path

    with pytest.raises(ConfigError) as exc:
        check_model_path(_cfg(model, backend), parts)
    return str(exc.value)


def test_a_part_without_its_weights_or_shards_is_named(tmp_path):
    """Before: only config.json files were checked, so a half-copied folder passed and the launch died
    after loading the parts before the missing weights."""
    from training.model_check import check_model_path

    model = _checkpoint(tmp_path / "wan")
    (model / "vae" / WEIGHT).unlink()
    err = _config_error(model)
    assert f"model_path {model}: missing weights: vae/ has no weights" in err and "transformer/" not in err
    (model / "vae" / "diffusion_pytorch_model.bin").write_bytes(b"")  # a .bin is weights as well
    shards = [f"model-{i:05d}-of-00006.safetensors" for i in range(1, 7)]
    index = {"metadata": {}, "weight_map": {f"layer.{i}.weight": s for i, s in enumerate(shards + shards[:2])}}
    enc = model / "text_encoder"
    (enc / WEIGHT).unlink()
    (enc / "model.safetensors.index.json").write_text(json.dumps(index))
    (enc / shards[0]).write_bytes(b"")
    err = _config_error(model)
    assert ("text_encoder/model.safetensors.index.json names 5 of 6 shards that are missing: "
            "model-00002-of-00006.safetensors, model-00003-of-00006.safetensors, model-00004-of-00006.safetensors "
            "and 2 more") in err
    for shard in shards[1:]:
        (enc / shard).write_bytes(b"")
    assert check_model_path(_cfg(model)) is None
    shutil.rmtree(model / "text_encoder")  # the exporter's parts: the transformer only
    (model / "transformer" / WEIGHT).unlink()
    assert "missing weights: transformer/ has no weights" in _config_error(model, parts="transformer")


def test_a_broken_weight_index_is_named_though_shards_are_there(tmp_path):
    """Before: an index that was not one (cut short in a copy) was skipped, and the shards beside it passed;
    diffusers reads the index first and the launch failed on it after loading the parts before."""
    from training.model_check import check_model_path

    model = _checkpoint(tmp_path / "wan")
    tr = model / "transformer"
    (tr / WEIGHT).rename(tr / "diffusion_pytorch_model-00001-of-00002.safetensors")
    (tr / "diffusion_pytorch_model.safetensors.index.json").write_text('{"metadata": {}, "weight_map": {"a": "diffu')
    assert ("missing weights: transformer/diffusion_pytorch_model.safetensors.index.json is not a weight index "
            "(not JSON: ") in _config_error(model)
    shards = {"a": "diffusion_pytorch_model-00001-of-00002.safetensors"}
    (tr / "diffusion_pytorch_model.safetensors.index.json").write_text(json.dumps({"weight_map": shards}))
    assert check_model_path(_cfg(model)) is None


def _saved(root: Path, backend: str) -> Path:
    """The tiny model's real transformer and VAE, save_pretrained (the text encoder: a stand-in folder)."""
    from policy.world_model import FlowWorldModel

    model = FlowWorldModel.tiny_wan() if backend == "wan" else FlowWorldModel.tiny_cosmos()
    model.transformer.save_pretrained(root / "transformer")
    model.vae.save_pretrained(root / "vae")
    for part in ("text_encoder", "tokenizer"):
        (root / part).mkdir()
    (root / "text_encoder" / "config.json").write_text("{}")
    (root / "text_encoder" / WEIGHT).write_bytes(b"")
    return root


def _edit(model: Path, part: str, **values) -> None:
    path = model / part / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **values}))


def test_an_unsupported_wan_layout_is_named_before_loading(tmp_path):
    """Before: a layout the trainer cannot feed passed and the run died at the first transformer call, after
    loading the whole model. (The Wan 2.1 I2V-14B layout, in_channels 2 z + 4, is supported: tests/test_wan_i2v.py.)"""
    from training.model_check import check_model_path

    wan = _saved(tmp_path / "wan", "wan")
    assert check_model_path(_cfg(wan)) is None  # the TI2V layout: in_channels = z_dim
    _edit(wan, "transformer", in_channels=20)  # more input than output channels, no image_dim: as the loader, an
    err = _config_error(wan)  # A14B expert (policy.wan_i2v.expert_layout_problem)
    assert err.startswith(f"model_path {wan}: transformer in_channels 20 (out_channels 16: a channel-concat image "
                          "condition) with no CLIP branch (image_dim null): a Wan 2.2 A14B expert")
    assert err.endswith("; transformer in_channels 20 is not supported; this trainer runs the TI2V layout "
                        "(in_channels = VAE z_dim 16) or the I2V-14B one (2 x z_dim + 4 mask channels)")
    _edit(wan, "transformer", in_channels=16, image_dim=1280, added_kv_proj_dim=5120)
    err = _config_error(wan)
    assert ("transformer image_dim 1280 (Wan 2.1 I2V: CLIP image embeddings) is not supported without the I2V-14B "
            "channel layout (in_channels = 2 x VAE z_dim + 4 mask channels)") in err
    assert "transformer added_kv_proj_dim 5120" in err
    assert "needs image_encoder" not in err  # the CLIP parts of a layout refused anyway: no step toward running it
    _edit(wan, "transformer", image_dim=None, added_kv_proj_dim=None, out_channels=32)
    assert "transformer out_channels 32 is not supported; the velocity is in the VAE latent" in _config_error(wan)
    _edit(wan, "transformer", out_channels=None)  # diffusers: out_channels or in_channels
    assert check_model_path(_cfg(wan)) is None
    _edit(wan, "vae", z_dim=48)  # a Wan 2.2 VAE under a 16-channel transformer
    assert "transformer in_channels 16 is not supported" in _config_error(wan)
    assert "transformer _class_name WanTransformer3DModel is not the CosmosTransformer3DModel that backend 'cosmos' " \
        "loads; use backend 'wan'" in _config_error(wan, "cosmos")  # policy.checkpoint.transformer_class_problem



def test_a_cosmos_layout_that_does_not_fit_the_latent_is_named(tmp_path, monkeypatch):
    """Before: the in_channels / padding-mask mismatch (and a missing torchvision) surfaced at the first
    transformer call, after loading the model."""
    from training.model_check import check_model_path

    cosmos = _saved(tmp_path / "cosmos", "cosmos")  # tiny: concat_padding_mask false, in_channels 16 + 2
    assert check_model_path(_cfg(cosmos, "cosmos")) is None
    _edit(cosmos, "transformer", in_channels=19)
    assert ("transformer in_channels 19 (concat_padding_mask False) is not supported; this trainer feeds the VAE "
            "latent (z_dim 16) + 1 condition-mask channel + the padding mask this trainer appends: in_channels 17 "
            "or 18") in _config_error(cosmos, "cosmos")
    _edit(cosmos, "transformer", in_channels=17, concat_padding_mask=True)  # the real layout
    monkeypatch.setattr("training.model_check._has_torchvision", lambda: False)
    assert "concat_padding_mask true needs torchvision" in _config_error(cosmos, "cosmos")
    monkeypatch.setattr("training.model_check._has_torchvision", lambda: True)
    assert check_model_path(_cfg(cosmos, "cosmos")) is None
    _edit(cosmos, "transformer", in_channels=18)
    assert _config_error(cosmos, "cosmos").endswith("(concat_padding_mask True) is not supported; this trainer feeds "
                                                   "the VAE latent (z_dim 16) + 1 condition-mask channel: in_channels 17")


def test_unknown_layout_fields_are_not_guessed(tmp_path):
    """Missing fields (or a missing VAE config, the exporter's transformer-only check) give no layout error."""
    from training.model_check import check_model_path

    model = _checkpoint(tmp_path / "wan")  # every config.json is {}
    assert check_model_path(_cfg(model)) is None and check_model_path(_cfg(model, "cosmos")) is None
    _edit(model, "transformer", in_channels=36)
    (model / "vae" / "config.json").unlink()
    # more input than output channels (16, the default) and no image_dim: the loader refuses it as a Wan 2.2 A14B
    # expert from the transformer config alone (policy.world_model), and so does the check, VAE or not
    assert "a Wan 2.2 A14B expert" in _config_error(model, parts="transformer")
    _edit(model, "transformer", image_dim=1280)  # Wan 2.1 I2V-14B's CLIP branch: its channel layout is unknown here
    assert check_model_path(_cfg(model), "transformer") is None
