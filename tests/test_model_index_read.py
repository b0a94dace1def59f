"""`policy.wan_i2v.read_model_index`: which ``model_index.json`` that cannot be read stops a Wan load.

Every unreadable index used to read as {} (no index), so the text-to-video and Wan 2.2 two-expert refusals it
feeds were skipped in silence: a Wan 2.1 T2V checkpoint trained as TI2V because its index was cut short or the
hub answered 500. Refusing every unreadable index (559936f, reverted) refused an offline HF cache holding the
weights but not ``model_index.json`` (a download of the transformer folder alone), which loads as before with a
warning. A real hub cache in a tmp folder, read through diffusers and huggingface_hub with the hub's metadata
request replaced (or offline mode on): no network.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policy.checkpoint import CheckpointFileUnreachable, CheckpointFileUnreadable
from policy.wan import TINY_WAN, build_wan_transformer
from policy.wan_i2v import read_model_index
from policy.world_model import FlowWorldModel
from tests.test_wan_families import SMOKE, T2V_INDEX, _folder, _load

# diffusers' load_config passes huggingface_hub's deprecated local_dir_use_symlinks to hf_hub_download (its code,
# not this project's): the hub path these tests drive warns every time
pytestmark = pytest.mark.filterwarnings("ignore:The `local_dir_use_symlinks` argument is deprecated:UserWarning")

REPO = "org/tiny-wan"


def _hub_cache(monkeypatch: pytest.MonkeyPatch, root: Path, index_text: str | None = None) -> Path:
    """A Hugging Face cache (the hub's own layout) holding REPO's transformer config at ``main``, and
    ``model_index.json`` when ``index_text`` is given; huggingface_hub pointed at it."""
    import huggingface_hub.constants

    snapshot = root / "models--org--tiny-wan" / "snapshots" / ("a" * 40)
    (snapshot / "transformer").mkdir(parents=True)
    (snapshot / "transformer" / "config.json").write_text(json.dumps(dict(build_wan_transformer(TINY_WAN).config)))
    if index_text is not None:
        (snapshot / "model_index.json").write_text(index_text)
    (root / "models--org--tiny-wan" / "refs").mkdir()
    (root / "models--org--tiny-wan" / "refs" / "main").write_text("a" * 40)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(root))
    return root


def _hub_answers(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    """Every hub metadata request (the HEAD before a download) raises ``error``, as the hub's client does."""
    import huggingface_hub.file_download

    def head(*_args, **_kwargs):
        raise error

    monkeypatch.setattr(huggingface_hub.file_download, "get_hf_file_metadata", head)


def _http_error(status: int) -> Exception:
    import httpx2  # huggingface_hub's own HTTP client (2.x)
    from huggingface_hub.errors import HfHubHTTPError

    request = httpx2.Request("HEAD", f"https://huggingface.co/{REPO}/resolve/main/model_index.json")
    return HfHubHTTPError(f"{status} Server Error", response=httpx2.Response(status, request=request))


def _no_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    import diffusers

    def no_load(*_args, **_kwargs):
        raise AssertionError("loaded weights of a checkpoint whose model_index.json cannot be read")

    monkeypatch.setattr(diffusers.WanTransformer3DModel, "from_pretrained", no_load)


@pytest.mark.parametrize("offline", ["HF_HUB_OFFLINE", "no connection"])
def test_an_index_the_hub_cache_lacks_offline_is_no_index_with_a_warning(tmp_path, monkeypatch, offline):
    """The weights cached without model_index.json, the hub not reached: loaded as before (the slow
    tests/test_model_revision.py run), the checks then judging by the transformer config alone, and it says so."""
    import huggingface_hub.constants

    _hub_cache(monkeypatch, tmp_path / "hub")
    if offline == "HF_HUB_OFFLINE":
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    else:
        import httpx2

        _hub_answers(monkeypatch, httpx2.ConnectError("[Errno 101] Network is unreachable"))
    with pytest.warns(UserWarning, match=rf"{REPO}'s model_index.json cannot be read: not in the Hugging Face "
                                         "cache, and the hub was not reached.*text-to-video.*transformer config alone"):
        assert read_model_index(REPO) == {}


@pytest.mark.parametrize("status", [500, 403, 401])
def test_an_index_the_hub_answers_with_an_error_stops_the_load(tmp_path, monkeypatch, status):
    """The hub reached but answering an error (down, access refused): it may hold a text-to-video index; the
    load stops before any weights, naming the repo, the file and the hub's answer (diffusers' own text said
    "does not appear to have a file named model_index.json", which it may well have)."""
    _hub_cache(monkeypatch, tmp_path / "hub")
    _hub_answers(monkeypatch, _http_error(status))
    _no_weights(monkeypatch)
    with pytest.raises(CheckpointFileUnreadable, match=rf"{REPO}'s model_index.json cannot be read.*{status}") as err:
        FlowWorldModel.from_pretrained(REPO, "wan", load_vae=False, load_text_encoder=False)
    assert not isinstance(err.value, CheckpointFileUnreachable)
    assert "does not appear to have" not in str(err.value)


@pytest.mark.parametrize("text", [json.dumps(T2V_INDEX)[:40], "[1, 2]"], ids=["cut short", "not an object"])
def test_a_cached_index_that_is_no_json_object_stops_the_load(tmp_path, monkeypatch, text):
    import huggingface_hub.constants

    _hub_cache(monkeypatch, tmp_path / "hub", text)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    _no_weights(monkeypatch)
    with pytest.raises(CheckpointFileUnreadable, match=rf"{REPO}'s model_index.json (cannot be read|holds no JSON)"):
        FlowWorldModel.from_pretrained(REPO, "wan", load_vae=False, load_text_encoder=False)


@pytest.mark.parametrize("text", [json.dumps(T2V_INDEX)[:40], '"WanPipeline"', b"\xff\xfe{}"],
                         ids=["cut short", "not an object", "not utf-8"])
def test_a_folder_whose_index_is_no_json_object_stops_the_load_and_the_check(tmp_path, text):
    """A local folder's model_index.json that is there but unreadable: the load stops naming it, and --check
    names it with the folder's other layout problems in one go (it was the only one named, or none)."""
    from training.config import ConfigError
    from training.config_io import load_config
    from training.model_check import check_model_path

    root = _folder(tmp_path / "m", {**TINY_WAN, "image_dim": 32}, T2V_INDEX)
    path = root / "model_index.json"
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    with pytest.raises(CheckpointFileUnreadable, match=rf"{root}'s model_index.json (cannot be read|holds no JSON)"):
        _load(root)
    cfg = load_config(SMOKE, ["--tiny", "false", "--model_path", str(root), "--backend", "wan"])
    with pytest.raises(ConfigError, match=r"model_index.json (cannot be read|holds no JSON).*; transformer "
                                          r"image_dim 32 .* is not supported"):
        check_model_path(cfg)


def test_missing_weights_and_layout_problems_are_named_in_one_check(tmp_path):
    """A half-copied folder of a refused model: --check named the missing weights alone, and the refusal (here
    a text-to-video index) only once they were copied, tens of GB later."""
    from training.config import ConfigError
    from training.config_io import load_config
    from training.model_check import check_model_path

    root = _folder(tmp_path / "m", TINY_WAN, T2V_INDEX)
    (root / "vae" / "diffusion_pytorch_model.safetensors").unlink()
    cfg = load_config(SMOKE, ["--tiny", "false", "--model_path", str(root), "--backend", "wan"])
    with pytest.raises(ConfigError, match=rf"^model_path {root}: missing weights: vae/ has no weights.*; a "
                                          "text-to-video checkpoint"):
        check_model_path(cfg)


@pytest.mark.parametrize("parts", ["all", "transformer"])
def test_a_config_the_loader_reads_that_cannot_be_read_is_named_by_the_check(tmp_path, parts):
    """A cut-short transformer/ or vae/ config.json (an interrupted copy) passed --check, which judged it as
    "not checked", and the launch failed in every rank on diffusers' "not a valid JSON file". The exporter's
    check (parts="transformer") does not load the VAE: its config is not the loader's problem there."""
    from training.config import ConfigError
    from training.config_io import load_config
    from training.model_check import check_model_path

    root = _folder(tmp_path / "m", TINY_WAN, None)
    (root / "transformer" / "config.json").write_text('{"_class_name": "WanTransformer3DModel", "in_ch')
    (root / "vae" / "config.json").write_text("[]")
    cfg = load_config(SMOKE, ["--tiny", "false", "--model_path", str(root), "--backend", "wan"])
    with pytest.raises(ConfigError, match=r"transformer/config.json cannot be read \(JSONDecodeError") as err:
        check_model_path(cfg, parts)
    assert ("vae/config.json holds no JSON object" in str(err.value)) == (parts == "all")
