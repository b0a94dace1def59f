"""Exporting the trained policy (training/export.py) and loading it back.

DeepSpeed checkpoints of real 2-rank runs are exported in tests/test_train_e2e.py (slow); here the
weights come from tiny models changed in place, so the save / load / check logic runs in seconds.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from policy.world_model import FlowWorldModel
from training.config_io import config_from_dict, config_to_dict, load_config
from training.engine import add_lora, set_full_finetune
from training.export import ExportError, apply_weights, export_policy, load_policy
from training.export_folder import read_export, save_policy
from training.models import build_world_model

SMOKE = Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml"


def _cfg(**over):
    args = [f"--{k}={v}" for k, v in over.items()]
    return load_config(SMOKE, args)


def _perturb(module: torch.nn.Module, seed: int = 1) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            if p.requires_grad:
                p.add_(0.05 * torch.randn(p.shape, generator=gen))


def _velocity(model: FlowWorldModel, seed: int = 0) -> torch.Tensor:
    imgs = np.random.default_rng(seed).integers(0, 256, (1, 32, 32, 3), dtype=np.uint8)
    with torch.no_grad():
        cond = model.encode_prompts(imgs, ["open the drawer"], num_frames=9)
        x = torch.randn((1, *cond.first_frame_latent.shape[1:2], cond.num_latent_frames,
                         *cond.first_frame_latent.shape[3:]), generator=torch.Generator().manual_seed(seed))
        return model.velocity(x, torch.tensor([0.7]), cond)


def test_full_export_round_trip(tmp_path):
    cfg = _cfg()
    trained = build_world_model(cfg, "cpu")
    set_full_finetune(trained)
    _perturb(trained.transformer)
    out = save_policy(trained, cfg, tmp_path / "final", iteration=7, source="unit")
    info, stored = read_export(out)
    assert info["finetune"] == "full" and info["iteration"] == 7 and stored == cfg
    assert (out / "transformer" / "config.json").is_file()
    loaded, _, _ = load_policy(out)
    base, _, _ = load_policy(out, weights="base")
    fresh = build_world_model(cfg, "cpu").transformer.state_dict()
    for name, value in trained.transformer.state_dict().items():
        assert torch.equal(loaded.transformer.state_dict()[name], value), name
        assert torch.equal(base.transformer.state_dict()[name], fresh[name]), name
    assert not loaded.training and not base.training


@pytest.mark.slow
def test_lora_export_merges_the_adapter(tmp_path):
    cfg = _cfg(finetune="lora", lora_rank=4)
    trained = build_world_model(cfg, "cpu")
    add_lora(trained, cfg)
    _perturb(trained.transformer)  # only the adapters require grad
    trained.eval()
    out = save_policy(trained, cfg, tmp_path / "final", iteration=3, source="unit")
    assert {"adapter_config.json", "adapter_model.safetensors"} <= {p.name for p in (out / "transformer_lora").iterdir()}
    loaded, info, _ = load_policy(out)
    base, _, _ = load_policy(out, weights="base")
    assert info["weights"] == "transformer_lora"
    assert "lora" not in " ".join(n for n, _ in loaded.transformer.named_parameters())  # merged
    v_trained, v_loaded, v_base = _velocity(trained), _velocity(loaded), _velocity(base)
    assert torch.allclose(v_loaded, v_trained, atol=1e-5)
    assert not torch.allclose(v_base, v_trained, atol=1e-4)


@pytest.mark.parametrize("finetune", ["full", "lora"])
@pytest.mark.slow
def test_a_zero_stage_0_checkpoint_exports_from_its_module_file(tmp_path, finetune):
    """Stage 0 keeps no ZeRO shards: DeepSpeed saves the whole module (frozen weights too) in one file, and
    DeepSpeed's consolidation of shards failed on it ('NoneType' object is not iterable) at the end of
    every stage-0 run. Laid out as the engine saves it (training.engine.PolicyStep names)."""
    cfg = _cfg(finetune=finetune, lora_rank=4, output_dir=str(tmp_path / "run"))
    trained = build_world_model(cfg, "cpu")
    add_lora(trained, cfg) if finetune == "lora" else set_full_finetune(trained)
    _perturb(trained.transformer)
    trained.eval()
    ckpt = tmp_path / "run" / "checkpoints"
    (ckpt / "iter_000003").mkdir(parents=True)
    (ckpt / "latest").write_text("iter_000003")
    with pytest.raises(ExportError, match="cannot read checkpoint .*mp_rank_00_model_states.pt is missing"):
        export_policy(cfg, tmp_path / "final")
    module = {f"world_model.transformer.{k}": v for k, v in trained.transformer.state_dict().items()}
    torch.save({"module": module, "optimizer": None}, ckpt / "iter_000003" / "mp_rank_00_model_states.pt")
    out = export_policy(cfg, tmp_path / "final")
    loaded, info, _ = load_policy(out)
    assert info["iteration"] == 3
    assert torch.allclose(_velocity(loaded), _velocity(trained), atol=1e-5)
    assert not torch.allclose(_velocity(load_policy(out, weights="base")[0]), _velocity(trained), atol=1e-4)


@pytest.mark.slow
def test_a_checkpoint_exports_in_the_dtype_it_was_trained_in(tmp_path, capsys):
    """config.yaml is the last launch's: a resume that switched to bfloat16 and died before its first save left
    the float32 checkpoint to be exported, saved and sampled in bfloat16. Its layout.json says float32."""
    from training.resume import StateLayout, write_layout

    cfg = _cfg(output_dir=str(tmp_path / "run"))
    trained = build_world_model(cfg, "cpu")
    set_full_finetune(trained)
    _perturb(trained.transformer)
    folder = tmp_path / "run" / "checkpoints" / "iter_000002"
    folder.mkdir(parents=True)
    (folder.parent / "latest").write_text(folder.name)
    module = {f"world_model.transformer.{k}": v for k, v in trained.transformer.state_dict().items()}
    torch.save({"module": module, "optimizer": None}, folder / "mp_rank_00_model_states.pt")
    write_layout(folder, StateLayout(0, "float32"))
    out = export_policy(_cfg(output_dir=str(tmp_path / "run"), dtype="bfloat16"), tmp_path / "final")
    loaded, info, stored = load_policy(out)
    assert info["config"]["dtype"] == stored.dtype == "float32" and "trained in float32" in capsys.readouterr().err
    assert all(p.dtype == torch.float32 for p in loaded.transformer.parameters())
    assert torch.allclose(_velocity(loaded), _velocity(trained), atol=1e-5)


def test_apply_weights_refuses_a_checkpoint_of_another_model():
    cfg = _cfg()
    model = build_world_model(cfg, "cpu")
    set_full_finetune(model)
    state = {k: v.clone() for k, v in model.transformer.state_dict().items()}
    first = next(iter(state))
    with pytest.raises(ExportError, match="missing trainable weights"):
        apply_weights(model, {k: v for k, v in state.items() if k != first})
    with pytest.raises(ExportError, match="unknown names"):
        apply_weights(model, {**state, "blocks.99.weight": torch.zeros(1)})
    with pytest.raises(ExportError, match="shape mismatches"):
        apply_weights(model, {**state, first: torch.zeros(3, 3, 3)})
    lora_cfg = _cfg(finetune="lora", lora_rank=4)
    lora = build_world_model(lora_cfg, "cpu")
    add_lora(lora, lora_cfg)
    with pytest.raises(ExportError, match="missing trainable weights"):  # a full checkpoint has no adapters
        apply_weights(lora, state)
    state[first] += 1.0
    apply_weights(model, state)
    assert torch.equal(model.transformer.state_dict()[first], state[first])


def test_export_folders_are_checked_and_never_clobber_other_files(tmp_path):
    cfg = _cfg()
    model = build_world_model(cfg, "cpu")
    with pytest.raises(ExportError, match="not a policy export"):
        read_export(tmp_path)
    run = tmp_path / "run"  # a run folder given for its export: name the exports inside it
    for name in ("export-iter_000004", "final", "checkpoints"):
        (run / name).mkdir(parents=True)
    for name in ("export-iter_000004", "final"):
        (run / name / "export.json").write_text("{}")
    with pytest.raises(ExportError, match=re.escape(f"did you mean {run / 'final'} (or {run / 'export-iter_000004'})")):
        read_export(run)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(ExportError, match="not an export folder"):
        save_policy(model, cfg, busy, iteration=1, source="unit")
    assert (busy / "notes.txt").read_text() == "mine"
    (tmp_path / "file").write_text("x")
    with pytest.raises(ExportError, match="not a folder"):
        save_policy(model, cfg, tmp_path / "file", iteration=1, source="unit")
    out = save_policy(model, cfg, tmp_path / "final", iteration=1, source="unit")
    save_policy(model, cfg, out, iteration=2, source="unit")  # an earlier export is replaced
    assert read_export(out)[0]["iteration"] == 2
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no work folder left
    info = json.loads((out / "export.json").read_text())
    assert info["config"]["image_fit"] == "crop" and read_export(out)[1].image_fit == "crop"
    older = {**info, "config": {k: v for k, v in info["config"].items() if k != "image_fit"}}
    (out / "export.json").write_text(json.dumps(older))  # written before image_fit: trained on stretched images
    assert read_export(out)[1].image_fit == "stretch"
    (out / "export.json").write_text(json.dumps({**info, "format": "other/9"}))
    with pytest.raises(ExportError, match="unknown export format"):
        read_export(out)


def test_config_dict_round_trip_and_absolute_dataset_file(tmp_path, monkeypatch):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"text": "stack the blocks", "image_seed": 5}) + "\n")
    monkeypatch.chdir(tmp_path)
    cfg = load_config(SMOKE, ["--dataset_file", "prompts.jsonl", "--sde_window", "[1, 3]"])
    assert config_from_dict(config_to_dict(cfg)) == cfg
    out = save_policy(build_world_model(cfg, "cpu"), cfg, tmp_path / "final", iteration=None, source="unit")
    _, stored = read_export(out)
    assert stored.dataset_file == str(prompts.resolve()) and stored.sde_window == (1, 3)


def test_the_exporter_loads_only_the_transformer_of_a_pretrained_checkpoint(tmp_path):
    """parts="transformer": a diffusers-layout folder without VAE or text encoder is enough to export."""
    tiny = FlowWorldModel.tiny_cosmos(seed=3)
    tiny.transformer.save_pretrained(tmp_path / "base" / "transformer")
    cfg = _cfg(tiny="false", model_path=str(tmp_path / "base"))
    model = build_world_model(cfg, "cpu", parts="transformer")
    assert model.vae is None and model.text_encoder is None
    for a, b in zip(tiny.transformer.parameters(), model.transformer.parameters(), strict=True):
        assert torch.equal(a, b)
    with pytest.raises(OSError):  # the sampler needs the whole model: no VAE in that folder
        build_world_model(cfg, "cpu")


def test_a_missing_base_model_is_named(tmp_path):
    """An export needs the base it was trained from (VAE, text encoder, the LoRA base): a moved or
    missing model_path is an ExportError naming it, not a loader traceback."""
    cfg = _cfg()
    out = save_policy(build_world_model(cfg, "cpu"), cfg, tmp_path / "final", iteration=1, source="unit")
    info = json.loads((out / "export.json").read_text())
    info["config"].update(tiny=False, model_path=str(tmp_path / "moved"))
    (out / "export.json").write_text(json.dumps(info))
    with pytest.raises(ExportError, match="cannot load the base model at model_path .*moved"):
        load_policy(out)


def _dtypes(module: torch.nn.Module) -> dict[str, torch.dtype]:
    return {name: t.dtype for name, t in [*module.named_parameters(), *module.named_buffers()]}


@pytest.mark.parametrize("backend", ["cosmos", "wan"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_tiny_model_has_the_precision_from_pretrained_gives_its_weights(tmp_path, backend, dtype):
    """The tiny model was cast whole with .to(dtype), while from_pretrained(torch_dtype=dtype) keeps the
    class's _keep_in_fp32_modules (Wan: time embedder, norms, modulation tables, rope) in float32."""
    model = build_world_model(_cfg(backend=backend, dtype=dtype), "cpu").transformer
    model.save_pretrained(str(tmp_path / "transformer"))
    reloaded = type(model).from_pretrained(str(tmp_path / "transformer"), torch_dtype=getattr(torch, dtype))
    assert _dtypes(model) == _dtypes(reloaded)
    if backend == "wan":  # the rule is exercised: some tensors stay float32, the rest take the run's dtype
        assert set(_dtypes(model).values()) == {torch.float32, getattr(torch, dtype)}
    for name, value in reloaded.state_dict().items():
        assert torch.equal(model.state_dict()[name], value), name


@pytest.mark.slow
def test_unchanged_weights_sample_the_same_videos_as_the_base(tmp_path):
    """A bfloat16 tiny Wan export with untouched weights: --weights trained (reloaded by from_pretrained) and
    --weights base (the tiny model) differed by up to 6 pixel levels before, from precision alone."""
    from tools.video import read_all_frames
    from training.config import PromptSpec
    from training.generate import generate

    cfg = _cfg(backend="wan", dtype="bfloat16", num_steps=3, sde_window="[0, 2]")
    model = build_world_model(cfg, "cpu")
    set_full_finetune(model)
    out = save_policy(model, cfg, tmp_path / "final", iteration=0, source="unit")
    prompts = [PromptSpec("push the block", image_seed=1)]
    for weights in ("trained", "base"):
        assert generate(out, tmp_path / weights, prompts=prompts, weights=weights).written == 1
    trained, base = (read_all_frames(tmp_path / w / "videos" / "p0000_s00.mp4") for w in ("trained", "base"))
    assert np.array_equal(trained, base)


def test_a_prompt_file_that_is_not_there_is_named_not_exported(tmp_path, monkeypatch):
    """An export from another directory than the run's launch resolved a relative dataset_file there and
    stored a path that named nothing; `generate` then failed with "prompt file not found"."""
    (tmp_path / "prompts.jsonl").write_text(json.dumps({"text": "stack the blocks"}) + "\n")
    monkeypatch.chdir(tmp_path)
    cfg = _cfg(dataset_file="prompts.jsonl")
    model = build_world_model(cfg, "cpu")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    with pytest.raises(ExportError, match=r"dataset_file 'prompts.jsonl' is not a file \(relative to the current "
                                          r"directory .*elsewhere; .* launched from"):
        save_policy(model, cfg, tmp_path / "final", iteration=1, source="unit")
    with pytest.raises(ExportError, match="dataset_file 'prompts.jsonl' is not a file"):  # before anything loads
        export_policy(cfg, tmp_path / "final", checkpoint_dir=tmp_path / "no-checkpoints")
    assert not (tmp_path / "final").exists()
    with pytest.raises(ExportError, match=f"dataset_file '{tmp_path / 'gone.jsonl'}' is not a file;"):
        save_policy(model, _cfg(dataset_file=str(tmp_path / "gone.jsonl")), tmp_path / "final", iteration=1,
                    source="unit")
    monkeypatch.chdir(tmp_path)  # from the launch directory it is found, and stored absolute
    out = save_policy(model, cfg, tmp_path / "final", iteration=1, source="unit")
    assert read_export(out)[1].dataset_file == str(tmp_path / "prompts.jsonl")


def test_an_export_killed_while_replacing_the_earlier_one_leaves_an_export(tmp_path, monkeypatch):
    """A resumed run exports to final/ again, over the earlier run's export. The earlier folder was deleted in
    place: a kill part-way (the job's time limit, at the end of training) left final/ without export.json, and
    every later export (the trainer's, `training.export --run`) refused it as 'not an export folder'."""
    import shutil

    import training.export_folder as export_folder

    cfg = _cfg()
    model = build_world_model(cfg, "cpu")
    out = save_policy(model, cfg, tmp_path / "final", iteration=1, source="unit")
    real = shutil.rmtree
    calls = []

    def killed_part_way(path, *args, **kwargs):
        calls.append(Path(path))
        if len(calls) == 1:  # the first delete: export.json goes, then the process is killed
            (Path(path) / "export.json").unlink(missing_ok=True)
            raise KeyboardInterrupt
        return real(path, *args, **kwargs)

    monkeypatch.setattr(export_folder.shutil, "rmtree", killed_part_way)
    with pytest.raises(KeyboardInterrupt):
        save_policy(model, cfg, out, iteration=2, source="unit")
    monkeypatch.setattr(export_folder.shutil, "rmtree", real)
    assert read_export(out)[0]["iteration"] in (1, 2)  # the earlier export or the new one, whole
    assert read_export(save_policy(model, cfg, out, iteration=3, source="unit"))[0]["iteration"] == 3
    assert not list(tmp_path.glob(".final-*"))  # the killed export's folders went with the next one


def test_the_next_export_restores_an_export_moved_aside_by_a_kill_and_clears_work_folders(tmp_path):
    """Killed between moving the earlier export aside and moving the new one in: final/ was missing and the
    earlier export sat in a hidden .final-*-old folder, with the work folder beside it, neither ever removed."""
    cfg = _cfg()
    model = build_world_model(cfg, "cpu")
    out = save_policy(model, cfg, tmp_path / "final", iteration=1, source="unit")
    out.rename(tmp_path / ".final-abc123-old")
    (tmp_path / ".final-def456").mkdir()  # a work folder the kill left half written
    (tmp_path / ".final-def456" / "partial.bin").write_bytes(b"x")

    def broken(*args, **kwargs):
        raise OSError("disk full")

    model.transformer.save_pretrained = broken  # this export fails too: the earlier one must survive it
    with pytest.raises(ExportError, match="cannot write the export to .*final: OSError: disk full"):
        save_policy(model, cfg, out, iteration=2, source="unit")  # named, not a traceback
    assert read_export(out)[0]["iteration"] == 1
    assert not list(tmp_path.glob(".final-*"))


def test_a_base_model_of_the_other_backend_is_named(tmp_path):
    """from_pretrained refuses a checkpoint of the other backend with a ValueError (policy/checkpoint.py);
    export caught only OSError, so that reached the user as a traceback instead of an ExportError."""
    from policy.world_model import FlowWorldModel

    cfg = _cfg()
    out = save_policy(build_world_model(cfg, "cpu"), cfg, tmp_path / "final", iteration=1, source="unit")
    base = tmp_path / "base"
    other = FlowWorldModel.tiny_wan(seed=3) if cfg.backend == "cosmos" else FlowWorldModel.tiny_cosmos(seed=3)
    other.transformer.save_pretrained(base / "transformer")
    other.vae.save_pretrained(base / "vae")
    (base / "text_encoder").mkdir()
    (base / "text_encoder" / "config.json").write_text("{}")
    (base / "text_encoder" / "model.safetensors").write_bytes(b"")  # a stand-in: from_pretrained checks it exists
    (base / "tokenizer").mkdir()
    info = json.loads((out / "export.json").read_text())
    info["config"].update(tiny=False, model_path=str(base))
    (out / "export.json").write_text(json.dumps(info))
    with pytest.raises(ExportError, match="cannot load the base model at model_path .*base.*use backend"):
        load_policy(out)


def test_a_full_export_loads_its_transformer_once_not_the_base_one_too(tmp_path, monkeypatch):
    """load_policy loaded the whole base model, its transformer included, and then replaced the transformer by the
    export's: a pretrained base transformer (tens of GB) was read from disk and held in memory for nothing."""
    import diffusers

    from policy import text

    tiny = FlowWorldModel.tiny_wan(seed=3)
    for part in ("transformer", "vae"):
        getattr(tiny, part).save_pretrained(tmp_path / "base" / part)
    for part in ("text_encoder", "tokenizer"):  # stand-ins: the hash encoder below replaces UMT5
        (tmp_path / "base" / part).mkdir()
    (tmp_path / "base" / "text_encoder" / "config.json").write_text("{}")
    (tmp_path / "base" / "text_encoder" / "model.safetensors").write_bytes(b"")
    monkeypatch.setattr(text.WanT5TextEncoder, "from_pretrained",
                        classmethod(lambda _cls, *_a, **_k: text.HashTextEncoder(seq_len=8, dim=24)))
    cfg = _cfg(backend="wan", tiny="false", model_path=str(tmp_path / "base"))
    trained = build_world_model(cfg, "cpu")
    set_full_finetune(trained)
    _perturb(trained.transformer)
    out = save_policy(trained, cfg, tmp_path / "final", iteration=1, source="unit")
    loads = []
    real = diffusers.WanTransformer3DModel.from_pretrained.__func__
    monkeypatch.setattr(diffusers.WanTransformer3DModel, "from_pretrained",
                        classmethod(lambda cls, path, **kw: loads.append(str(path)) or real(cls, path, **kw)))
    loaded, _, _ = load_policy(out)
    assert loads == [str(out / "transformer")]
    for name, value in trained.transformer.state_dict().items():
        assert torch.equal(loaded.transformer.state_dict()[name], value), name
    loads.clear()
    load_policy(out, weights="base")
    assert loads == [str(tmp_path / "base")]
