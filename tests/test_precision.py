"""A run's models sample and score in the numerics of its DeepSpeed engine (training/numerics.py).

DeepSpeed's bf16 engine casts every parameter of the policy to bf16, also the modules diffusers keeps in
float32 (Wan's time embedder, norms, modulation tables); the frozen reference and ``load_policy`` kept
them in float32, so mu-KL was 1e-5 at an unchanged policy and the training's held-out videos differed
from ``training.generate`` of the export by up to 5 pixel levels on the same noise.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from tests.launches import launch
from tests.test_export import _velocity
from training.config import PromptSpec
from training.config_io import load_config
from training.engine import add_lora, frozen_reference, set_full_finetune
from training.export import load_policy
from training.export_folder import save_policy
from training.models import build_world_model

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "training" / "configs" / "smoke.yaml"


def _cfg(**over):
    return load_config(SMOKE, [f"--{k}={v}" for k, v in over.items()])


def _float32(module: torch.nn.Module) -> list[str]:
    return [name for name, p in module.named_parameters() if p.dtype == torch.float32]


def test_the_engine_cast_covers_every_parameter_and_no_buffer():
    from training.numerics import cast_like_engine

    model = build_world_model(_cfg(backend="wan", dtype="bfloat16"), "cpu").transformer
    assert _float32(model)  # diffusers' rule kept some in float32
    buffers = {name: b.dtype for name, b in model.named_buffers()}
    cast_like_engine(model, "float32")
    assert _float32(model)
    cast_like_engine(model, "bfloat16")
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    assert {name: b.dtype for name, b in model.named_buffers()} == buffers


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_the_full_finetuning_reference_has_the_engines_precision(dtype):
    cfg = _cfg(backend="wan", dtype=dtype)
    model = build_world_model(cfg, "cpu")
    set_full_finetune(model)
    kept = _float32(model.transformer)
    reference = frozen_reference(model, cfg).world_model.transformer
    if dtype == "float32":
        assert _float32(reference) == kept
        return
    assert kept and not _float32(reference)
    for name, value in model.transformer.named_parameters():  # the engine's rounding of the same weights
        assert torch.equal(reference.get_parameter(name), value.detach().to(torch.bfloat16)), name
    assert _float32(model.transformer) == kept  # the policy itself is left to the engine


@pytest.mark.parametrize("finetune", ["full", "lora"])
def test_load_policy_samples_in_the_engines_precision(tmp_path, finetune):
    """--weights trained and base alike; the export's files keep the float32 masters of those modules."""
    cfg = _cfg(backend="wan", dtype="bfloat16", finetune=finetune)
    model = build_world_model(cfg, "cpu")
    add_lora(model, cfg) if finetune == "lora" else set_full_finetune(model)
    kept = _float32(model.transformer)
    out = save_policy(model, cfg, tmp_path / "final", iteration=1, source="unit")
    for weights in ("trained", "base"):
        loaded = load_policy(out, weights=weights)[0].transformer
        assert not _float32(loaded), (weights, _float32(loaded)[:3])
    if finetune == "full":
        saved = load_file(str(next((out / "transformer").glob("*.safetensors"))))
        assert kept and all(saved[name].dtype == torch.float32 for name in kept)


def test_a_bf16_lora_policy_keeps_its_adapter_beside_the_base_weights(tmp_path):
    """The engine adds the bf16 adapter's output to the bf16 base layer's; merged weights W + BA were rounded to
    bf16 once more, and the training's held-out clips of a checkpoint differed from its export's by up to 5
    pixel levels."""
    from training.numerics import cast_like_engine

    cfg = _cfg(backend="wan", dtype="bfloat16", finetune="lora")
    model = build_world_model(cfg, "cpu")
    add_lora(model, cfg)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.transformer.parameters():
            if p.requires_grad:  # trained adapters (lora_B starts at zero)
                p.add_(0.2 * torch.randn(p.shape, generator=gen))
    out = save_policy(model, cfg, tmp_path / "final", iteration=3, source="unit")
    cast_like_engine(model.transformer, cfg.dtype)  # what deepspeed.initialize does to the policy
    loaded = load_policy(out)[0]
    assert torch.equal(_velocity(loaded), _velocity(model.eval()))


def test_zero3_runs_compute_linear_layers_as_deepspeeds_zero3_linear(tmp_path):
    """ZeRO-3 replaces torch.nn.functional.linear in the training process; its bias-after-matmul rounds twice in
    bf16, so the same weights give other outputs than torch's fused linear."""
    from deepspeed.runtime.zero.linear import zero3_linear_wrap

    from training.numerics import use_zero3_linear, zero3_linear

    assert not zero3_linear(_cfg()) and zero3_linear(_cfg(zero_stage=3))
    assert zero3_linear(_cfg(ds_config="ds_zero3.json")) and not zero3_linear(_cfg(ds_config="ds_zero3.json",
                                                                                 zero_stage=2))
    off = tmp_path / "ds.json"
    off.write_text(json.dumps({"zero_optimization": {"stage": 3, "memory_efficient_linear": False}}))
    assert not zero3_linear(_cfg(ds_config=str(off)))
    gen = torch.Generator().manual_seed(0)
    linear = torch.nn.Linear(64, 64).to(torch.bfloat16)
    x = torch.randn(2, 16, 64, generator=gen).to(torch.bfloat16)
    with torch.no_grad():
        torch_out = linear(x)
        assert use_zero3_linear(torch.nn.Sequential(linear)) == 1
        assert torch.equal(linear(x), zero3_linear_wrap(x, linear.weight, linear.bias))
    assert not torch.equal(linear(x), torch_out)


@pytest.mark.slow
def test_the_reference_and_load_policy_match_the_real_bf16_engine(tmp_path):
    """tests/precision_probe.py: mu-KL of the reference to the unchanged ZeRO-2 policy is exactly 0 (it was
    1.02e-5 in a 2-rank run), and the ODE clip the held-out evaluation samples from the fresh ZeRO-3 LoRA
    policy is the one load_policy's base and trained models sample, in a process of their own (it differed
    by up to 5 pixel levels: float32 modules, then ZeRO-3's linear)."""
    from training.data import sample_seed
    from training.generate import sample_video
    from training.models import encode_prompt

    out = tmp_path / "probe.json"
    proc = launch([sys.executable, str(ROOT / "tests" / "precision_probe.py"), str(out), str(tmp_path / "x")],
                  timeout=600, what="precision probe")
    assert proc.returncode == 0, proc.stderr[-4000:]
    found = json.loads(out.read_text())
    assert found["full"] == {"engine_fp32": [], "reference_fp32": [], "mu_kl": 0.0}
    assert found["lora"] == {"linear_replaced": True}  # why load_policy must follow it
    engine_clip = np.load(tmp_path / "engine_clip.npy")
    assert "zero3" not in getattr(torch.nn.functional.linear, "__name__", "")  # this process: torch's own
    for weights in ("base", "trained"):
        model, _, cfg = load_policy(tmp_path / "x", weights=weights)
        with torch.no_grad():
            cond = encode_prompt(model, cfg, PromptSpec("open the drawer", image_seed=12), None)
        clip = sample_video(model, cond, "ode", None, cfg.num_steps, cfg.shift, sample_seed(cfg.seed, 0, 0))
        assert np.array_equal(clip, engine_clip), (weights, np.abs(clip.astype(int) - engine_clip).max())
