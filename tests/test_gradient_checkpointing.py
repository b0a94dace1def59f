"""TrainConfig.gradient_checkpointing: the policy-gradient forward keeps fewer activations and gives
the same gradients, for tiny Cosmos and Wan transformers, with full weights and with LoRA adapters."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from policy.diffusers_model import enable_gradient_checkpointing
from policy.rollout import RolloutConfig, rollout, step_log_prob
from policy.world_model import FlowWorldModel
from training.config import TrainConfig
from training.config_io import config_from_dict
from training.engine import add_lora, set_full_finetune

CFG = RolloutConfig(num_steps=4, sde_window=(0, 2), guidance_scale=2.0)


def _model(backend: str, finetune: str, checkpointing: bool) -> FlowWorldModel:
    m = FlowWorldModel.tiny_cosmos() if backend == "cosmos" else FlowWorldModel.tiny_wan()
    if checkpointing:  # as the trainer does: before LoRA wraps the transformer
        enable_gradient_checkpointing(m.transformer)
    if finetune == "lora":
        add_lora(m, TrainConfig(tiny=True, backend=backend, lora_rank=4))
        for name, p in m.transformer.named_parameters():  # peft starts B at 0: make the adapters matter
            if "lora_B" in name:
                torch.nn.init.normal_(p, std=0.05, generator=torch.Generator().manual_seed(len(name)))
    else:
        set_full_finetune(m)
    return m


def _grads_and_saved_bytes(model: FlowWorldModel) -> tuple[dict[str, torch.Tensor], int]:
    imgs = np.random.default_rng(0).integers(0, 256, (2, 32, 32, 3), dtype=np.uint8)
    cond = model.encode_prompts(imgs, ["stack the blocks", "open the drawer"], num_frames=9, negative_prompt="")
    with torch.no_grad():
        record = rollout(model, cond, CFG, generator=torch.Generator().manual_seed(1)).steps[1]
    saved = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t.numel() * t.element_size())
        return t

    model.zero_grad(set_to_none=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        lp, _, _, _ = step_log_prob(model, cond, record, CFG)
    lp.sum().backward()
    grads = {n: p.grad.clone() for n, p in model.transformer.named_parameters() if p.grad is not None}
    return grads, sum(saved)


@pytest.mark.parametrize("finetune", ["full", "lora"])
@pytest.mark.parametrize("backend", ["cosmos", "wan"])
@pytest.mark.slow
def test_checkpointing_keeps_gradients_and_drops_activations(backend, finetune):
    plain, plain_bytes = _grads_and_saved_bytes(_model(backend, finetune, False))
    ckpt, ckpt_bytes = _grads_and_saved_bytes(_model(backend, finetune, True))
    assert plain and plain.keys() == ckpt.keys()
    if finetune == "lora":
        assert all("lora_" in n for n in plain)
    assert sum(float(g.abs().sum()) for g in plain.values()) > 0
    for name, g in plain.items():
        assert torch.allclose(g, ckpt[name], rtol=1e-4, atol=1e-6), name
    assert ckpt_bytes < 0.6 * plain_bytes, (ckpt_bytes, plain_bytes)


def test_config_reads_the_switch():
    assert TrainConfig().gradient_checkpointing is False
    cfg = config_from_dict({"tiny": True, "reward": "brightness", "dataset": [{"text": "t"}],
                            "gradient_checkpointing": True})
    assert cfg.gradient_checkpointing is True
