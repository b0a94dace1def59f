"""FlowWorldModel.from_pretrained refuses what diffusers would load as a partly random model, and names what a
checkpoint folder lacks (policy/checkpoint.py). Tiny random real diffusers models saved to tmp folders; no hub."""

from __future__ import annotations

import re
import shutil
from functools import partial

import pytest
import torch
from safetensors.torch import load_file, save_file

from policy.world_model import FlowWorldModel
from tests.fake_loaders import recording_loader


def _save(root, backend: str) -> FlowWorldModel:
    tiny = FlowWorldModel.tiny_cosmos(seed=3) if backend == "cosmos" else FlowWorldModel.tiny_wan(seed=3)
    tiny.transformer.save_pretrained(root / "transformer")
    tiny.vae.save_pretrained(root / "vae")
    return tiny


@pytest.fixture(scope="module")
def saved_wan(tmp_path_factory) -> tuple:
    """The tiny random Wan model and its folder, built and saved once for the module (the build is the slow part)."""
    root = tmp_path_factory.mktemp("wan")
    return root, _save(root, "wan")


def _copy_wan(saved_wan, root) -> None:
    """`_save(root, "wan")`, copied from `saved_wan`: each test changes its own copy."""
    shutil.copytree(saved_wan[0], root, dirs_exist_ok=True)


def test_a_checkpoint_of_the_other_backend_is_refused(tmp_path):
    _save(tmp_path, "cosmos")
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path}/transformer: transformer _class_name CosmosTransformer3DModel is not")):
        FlowWorldModel.from_pretrained(tmp_path, "wan", torch_dtype=torch.float32, load_text_encoder=False)


@pytest.mark.parametrize(("name", "backend", "problem"), [
    ("WanTransformer3DModel", "wan", None),
    (None, "cosmos", None),  # no _class_name: not checked
    ("WanTransformer3DModel", "cosmos", "transformer _class_name WanTransformer3DModel is not the "
     "CosmosTransformer3DModel that backend 'cosmos' loads; use backend 'wan'"),
    ("FluxTransformer2DModel", "wan", "transformer _class_name FluxTransformer2DModel is not the "
     "WanTransformer3DModel that backend 'wan' loads; supported: CosmosTransformer3DModel, WanTransformer3DModel"),
])
def test_the_transformer_class_check_behind_loading_and_the_launch_check(name, backend, problem):
    """One check and message for from_pretrained and training.model_check (they had each written theirs)."""
    from policy.checkpoint import transformer_class_problem

    assert transformer_class_problem({} if name is None else {"_class_name": name}, backend) == problem


def test_weights_missing_from_the_transformer_are_refused(tmp_path, saved_wan):
    _copy_wan(saved_wan, tmp_path)
    weights = tmp_path / "transformer" / "diffusion_pytorch_model.safetensors"
    state = load_file(weights)
    dropped = sorted(state)[0]
    del state[dropped]
    save_file(state, weights)
    with pytest.raises(ValueError, match=f"1 weights missing: {dropped}"):
        FlowWorldModel.from_pretrained(tmp_path, "wan", torch_dtype=torch.float32, load_text_encoder=False)


def test_an_unknown_backend_is_refused_before_loading(tmp_path):
    with pytest.raises(ValueError, match="backend must be 'cosmos' or 'wan', got 'kairos'"):
        FlowWorldModel.from_pretrained(tmp_path / "missing", "kairos")


def test_a_missing_folder_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        FlowWorldModel.from_pretrained(str(tmp_path / "nowhere"), "wan")


def test_the_missing_parts_of_a_folder_are_named(tmp_path, saved_wan):
    _copy_wan(saved_wan, tmp_path)
    with pytest.raises(FileNotFoundError, match=r"lacks text_encoder/config\.json, tokenizer/"):
        FlowWorldModel.from_pretrained(tmp_path, "wan", torch_dtype=torch.float32)
    with pytest.raises(FileNotFoundError, match=r"lacks tr/config\.json"):
        FlowWorldModel.from_pretrained(tmp_path, "wan", transformer_subfolder="tr", load_text_encoder=False)


def test_a_hub_revision_reaches_every_loader(monkeypatch, saved_wan):
    """Cosmos-Predict2.5 keeps its diffusers files on a branch of its hub repo: `revision` goes to each part's
    from_pretrained (mocked at the diffusers / transformers call boundary: no network)."""
    import diffusers
    import transformers

    tiny = saved_wan[1]  # FlowWorldModel.tiny_wan(seed=3)
    seen: dict[str, dict] = {}

    fake = partial(recording_loader, seen)

    monkeypatch.setattr(diffusers.WanTransformer3DModel, "load_config", fake("config", dict(tiny.transformer.config)))
    monkeypatch.setattr(diffusers.DiffusionPipeline, "load_config",  # model_index.json (policy.wan_i2v)
                        fake("index", {"_class_name": "WanPipeline", "expand_timesteps": True}))
    monkeypatch.setattr(diffusers.WanTransformer3DModel, "from_pretrained", fake("transformer", (tiny.transformer, {})))
    monkeypatch.setattr(diffusers.AutoencoderKLWan, "from_pretrained", fake("vae", (tiny.vae, {})))
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", fake("tokenizer", object()))
    monkeypatch.setattr(transformers.UMT5EncoderModel, "from_pretrained",
                        fake("text_encoder", (torch.nn.Linear(1, 1), {"missing_keys": set()})))
    FlowWorldModel.from_pretrained("org/wan-repo", "wan", torch_dtype=torch.float32, revision="diffusers")
    assert sorted(seen) == ["config", "index", "text_encoder", "tokenizer", "transformer", "vae"]
    assert all(call["path"] == "org/wan-repo" and call["revision"] == "diffusers" for call in seen.values())


@pytest.mark.slow
def test_a_revision_with_a_local_folder_is_refused(tmp_path):
    _save(tmp_path, "wan")
    with pytest.raises(ValueError, match="revision 'diffusers' is for hub ids, but .* is a local folder"):
        FlowWorldModel.from_pretrained(tmp_path, "wan", load_text_encoder=False, revision="diffusers")


@pytest.mark.parametrize("part", ["transformer", "vae"])
def test_a_part_without_weights_is_named_before_anything_loads(tmp_path, monkeypatch, part, saved_wan):
    """Before: diffusers said "no file named diffusion_pytorch_model.bin found in directory ROOT" (the root, not
    the part, and the .bin it fell back to), and a missing VAE only after the whole transformer had loaded."""
    import diffusers

    _copy_wan(saved_wan, tmp_path)
    for weights in (tmp_path / part).glob("*.safetensors"):
        weights.unlink()

    def no_load(*_args, **_kwargs):
        raise AssertionError("loaded a part before the folder was checked")

    monkeypatch.setattr(diffusers.WanTransformer3DModel, "from_pretrained", no_load)
    with pytest.raises(FileNotFoundError, match=re.escape(f"checkpoint folder {str(tmp_path)!r} lacks weights: "
                                                          f"{part}/ has no weights")):
        FlowWorldModel.from_pretrained(tmp_path, "wan", torch_dtype=torch.float32, load_text_encoder=False)
