"""Run by tests/test_precision.py in a process of its own (one rank, gloo): the models that sample or score for a
bfloat16 tiny-Wan run against the real DeepSpeed engine that trains it. Writes a JSON file of

* ``full``: ZeRO-2, full fine-tuning: the float32 parameters of the engine's policy and of the frozen
  reference, and the mu-KL of the reference to the unchanged policy on a recorded SDE step;
* ``lora``: ZeRO-3, LoRA: whether the engine replaced ``torch.nn.functional.linear``; beside EXPORT_DIR (an
  export of the fresh policy) ``engine_clip.npy``, the ODE clip of a held-out item as the training's
  evaluation samples it from the engine's policy, for the test to compare with ``load_policy``'s.

    python tests/precision_probe.py OUT.json EXPORT_DIR
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import deepspeed
import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from policy.rollout import RolloutConfig, rollout  # noqa: E402
from training import engine as E  # noqa: E402
from training.config import PromptSpec  # noqa: E402
from training.config_io import load_config  # noqa: E402
from training.data import sample_seed  # noqa: E402
from training.export_folder import save_policy  # noqa: E402
from training.generate import sample_video  # noqa: E402
from training.grpo import mean_kl  # noqa: E402
from training.models import build_world_model, encode_prompt  # noqa: E402

SMOKE = ROOT / "training" / "configs" / "smoke.yaml"
PROMPT = PromptSpec("open the drawer", image_seed=12)


def _cfg(**over):
    return load_config(SMOKE, ["--backend=wan", "--dtype=bfloat16", "--num_steps=3", "--sde_window=[0, 2]",
                               *(f"--{k}={v}" for k, v in over.items())])


def _fp32(module: torch.nn.Module) -> list[str]:
    return sorted(n for n, p in module.named_parameters() if p.dtype == torch.float32)


def _cond(model):
    imgs = np.random.default_rng(0).integers(0, 256, (1, 32, 32, 3), dtype=np.uint8)
    with torch.no_grad():
        return model.encode_prompts(imgs, ["open the drawer"], num_frames=9)


def _engine(cfg, policy):
    params = [p for p in policy.parameters() if p.requires_grad]
    engine, *_ = deepspeed.initialize(model=policy, model_parameters=params, config=E.deepspeed_config(cfg, 1))
    return engine


def full(cfg) -> dict:
    torch.manual_seed(0)
    model = build_world_model(cfg, "cpu")
    E.set_full_finetune(model)
    reference = E.frozen_reference(model, cfg)
    engine = _engine(cfg, E.PolicyStep(model))
    model = engine.module.world_model
    rcfg = RolloutConfig(num_steps=cfg.num_steps, sde_window=tuple(cfg.sde_window), tau=cfg.tau, r_base=cfg.r_base,
                         shift=cfg.shift)
    cond = _cond(model).repeat_interleave(2)
    engine.module.eval()
    with torch.no_grad():
        record = rollout(model, cond, rcfg, generator=torch.Generator().manual_seed(1)).steps[0]
        _, mean, _, _ = engine(cond, record, rcfg)
        _, ref_mean, ref_std, _ = reference(cond, record, rcfg)
    kl = mean_kl(mean, ref_mean, ref_std, cfg.mu_kl_eps, weight_mask=cond.cond_mask)
    return {"engine_fp32": _fp32(engine.module), "reference_fp32": _fp32(reference), "mu_kl": float(kl)}


def lora(cfg, export_dir: Path) -> dict:
    """The engine's ODE clip of held-out item (0, 0), as the training's evaluation samples it, to compare with
    load_policy in a process where DeepSpeed has not replaced torch.nn.functional.linear."""
    torch.manual_seed(0)
    model = build_world_model(cfg, "cpu")
    E.add_lora(model, cfg)
    save_policy(model, cfg, export_dir, iteration=0, source="probe")  # the adapters are still zero
    linear = torch.nn.functional.linear
    engine = _engine(cfg, E.PolicyStep(model))
    engine.module.eval()
    model = engine.module.world_model
    with torch.no_grad():
        cond = encode_prompt(model, cfg, PROMPT, None)
    clip = sample_video(model, cond, "ode", None, cfg.num_steps, cfg.shift, sample_seed(cfg.seed, 0, 0))
    np.save(export_dir.parent / "engine_clip.npy", clip)
    return {"linear_replaced": torch.nn.functional.linear is not linear}


def main(result: str, export_dir: str) -> None:
    # a store this process serves on a port the OS picks, held to the end (a probed, closed port could be taken
    # by another process before the process group bound it); the process group joins it as torchrun's ranks do
    store = torch.distributed.TCPStore("127.0.0.1", 0, 1, is_master=True, wait_for_workers=False)
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(store.port),
                      TORCHELASTIC_USE_AGENT_STORE="True")
    deepspeed.init_distributed(dist_backend="gloo")
    out = {"full": full(_cfg(finetune="full", zero_stage=2)),
           "lora": lora(_cfg(finetune="lora", zero_stage=3), Path(export_dir))}
    Path(result).write_text(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
