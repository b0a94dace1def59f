"""Held-out evaluation under DeepSpeed ZeRO-3 (training/evaluate.py, the trainer's ``held_out``): every rank must
run the same number of forwards of the ZeRO-partitioned module, or a rank waits in a parameter gather forever.

What is partitioned: the engine wraps ``PolicyStep(world_model)``, and `FlowWorldModel` registers only the
transformer as a sub-module (its VAE, text and CLIP encoders are frozen helpers outside the module tree), so
only transformer forwards gather. Prompt encodes (text encoder, VAE encoder) and decodes may differ per rank;
transformer forwards may not. `training.evaluate.rank_items` pads the shorter share with a never-counted repeat.

The two-rank run uses ds_zero3.json (``stage3_param_persistence_threshold: 0``), so every transformer parameter is
partitioned as in a real run (the smoke config's ds_zero2.json with ``--zero_stage 3`` keeps each tiny parameter,
under DeepSpeed's default threshold of 1e5 elements, persistent). Checked: dealing the items without the pad
makes this test fail at once (gloo: "Is there a distributed collective mismatch in your code?")."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tests.launches import spawn_ranks
from training.config import PromptSpec, TrainConfig
from training.config_io import load_config

SMOKE = Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml"
FLAGS = ["--ds_config", "ds_zero3.json", "--num_steps", "2", "--num_frames", "5", "--sde_window", "[0, 1]"]
A, B, C = (PromptSpec("push the red block to the left", image_seed=11), PromptSpec("open the drawer", image_seed=12),
           PromptSpec("stack the blocks", image_seed=13))


def _cases(tmp: Path) -> dict[str, tuple[list[PromptSpec], int]]:
    """(held-out prompts, eval_samples) per case. On 2 ranks: ``odd``: 3 items, rank 0 encodes 2 prompts and
    samples 2, rank 1 encodes 1 and samples its item twice; ``repeated``: 2 prompts x 3 samples, shares with a
    prompt twice; ``single``: rank 1 has nothing of its own; ``failed``: rank 1's only prompt has no image (a
    never-scored stand-in, training/prompt_failures.py)."""
    gone = PromptSpec("pick up the cup", image=str(tmp / "gone.png"))
    return {"odd": ([A, B, C], 1), "repeated": ([A, B], 3), "single": ([A], 1), "failed": ([A, gone, C], 1)}


def _evaluate_cases(world_model: Any, cfg: TrainConfig, tmp: Path, rank: int, world: int) -> dict[str, Any]:
    """Every case's `training.evaluate.summarize_items` lines and this rank's transformer forwards per case."""
    from training.evaluate import evaluate, summarize_items
    from training.metrics import gather
    from training.rewards import build_reward

    reward = build_reward(cfg.reward or "", cfg.reward_options)
    forwards = [0]
    hook = world_model.transformer.register_forward_hook(lambda *_: forwards.__setitem__(0, forwards[0] + 1))
    out: dict[str, Any] = {}
    for name, (prompts, samples) in _cases(tmp).items():
        forwards[0] = 0
        run_cfg = dataclasses.replace(cfg, eval_samples=samples)
        part = evaluate(world_model, run_cfg, prompts, reward, iteration=0, rank=rank, world=world)
        out[name] = {"items": summarize_items(0, gather(part)), "forwards": forwards[0]}
    hook.remove()
    return out


def _rank_eval(rank: int, world: int, tmp: str) -> None:  # tests/launches.py set the rank's environment
    try:
        import deepspeed
        import torch

        from training import engine as ds_engine
        from training.models import build_world_model

        torch.set_num_threads(1)
        cfg = load_config(SMOKE, FLAGS)
        deepspeed.init_distributed(dist_backend="gloo")
        torch.manual_seed(cfg.seed)
        world_model = build_world_model(cfg, "cpu")
        ds_engine.set_full_finetune(world_model)
        policy = ds_engine.PolicyStep(world_model)
        engine, _, _, _ = deepspeed.initialize(model=policy, model_parameters=[p for p in policy.parameters()],
                                               config=ds_engine.deepspeed_config(cfg, 1))
        engine.module.eval()  # as the trainer's held_out
        partitioned = [not p.ds_persist for p in engine.module.world_model.transformer.parameters()]
        result = {"partitioned": all(partitioned),
                  "cases": _evaluate_cases(engine.module.world_model, cfg, Path(tmp), rank, world)}
        Path(tmp, f"rank{rank}.json").write_text(json.dumps(result))
        engine.destroy()
        deepspeed.comm.destroy_process_group()
        Path(tmp, f"rank{rank}.done").write_text("ok")
    except Exception as exc:  # the test names it
        Path(tmp, f"rank{rank}.done").write_text(f"{type(exc).__name__}: {exc}")


@pytest.mark.slow  # two DeepSpeed processes (~1 min here)
@pytest.mark.distributed
def test_two_ranks_evaluate_in_step_under_zero3_and_score_as_one_rank(tmp_path):
    """3 held-out items on 2 ranks (and shares of repeated prompts, a rank with nothing of its own, a rank whose
    only prompt has no image): both ranks run the same transformer forwards, so neither waits in a gather
    forever, and every item's reward is what one rank without DeepSpeed scores for it."""

    from training.evaluate import evaluate, summarize_items
    from training.models import build_world_model
    from training.rewards import build_reward

    spawn_ranks(_rank_eval, (2, str(tmp_path)), tmp_path, deadline_s=240)  # out of step: a hang
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0]["partitioned"] and ranks[1]["partitioned"]  # the forwards gather: out of step would hang
    cfg = load_config(SMOKE, FLAGS)
    model = build_world_model(cfg, "cpu").eval()
    reward = build_reward(cfg.reward or "", cfg.reward_options)
    steps = cfg.num_steps
    for name, (prompts, samples) in _cases(tmp_path).items():
        both = [r["cases"][name] for r in ranks]
        assert both[0]["forwards"] == both[1]["forwards"] == steps * -(-len(prompts) * samples // 2), name
        got = both[0]["items"]
        assert got == both[1]["items"], name  # every rank logs the same gathered lines
        one = summarize_items(0, [evaluate(model, dataclasses.replace(cfg, eval_samples=samples), prompts, reward,
                                           iteration=0, rank=0, world=1)])
        assert [(r["prompt"], r["sample"], r["reason"]) for r in got] == [
            (r["prompt"], r["sample"], r["reason"]) for r in one], name  # each real item once, none of the pads
        assert np.allclose([np.nan if r["reward"] is None else r["reward"] for r in got],
                           [np.nan if r["reward"] is None else r["reward"] for r in one], atol=1e-5,
                           equal_nan=True), name
    failed = [r for r in ranks[0]["cases"]["failed"]["items"] if r["reward"] is None]
    assert [(r["prompt"], r["ineligible_kind"]) for r in failed] == [(1, "error")]


@pytest.mark.parametrize("backend", ["cosmos", "wan"])
@pytest.mark.parametrize("finetune", ["full", "lora"])
def test_only_the_transformer_is_in_the_module_zero_partitions(backend, finetune):
    """What the evaluation's uneven prompt encodes rely on: the engine's module (`training.engine.PolicyStep`)
    holds the transformer's parameters alone, so the VAE, text encoder and CLIP encoder forwards gather nothing
    under ZeRO-3 and may differ per rank. Registering one of them as a sub-module would hang a held-out
    evaluation whose shares have different numbers of distinct prompts (and training's skipped decodes of
    diverged rollouts)."""
    from training import engine as ds_engine
    from training.models import build_world_model

    cfg = load_config(SMOKE, ["--backend", backend, "--finetune", finetune])
    world_model = build_world_model(cfg, "cpu")
    if finetune == "lora":
        ds_engine.add_lora(world_model, cfg)
    else:
        ds_engine.set_full_finetune(world_model)
    policy = ds_engine.PolicyStep(world_model)
    assert {id(p) for p in policy.parameters()} == {id(p) for p in world_model.transformer.parameters()}
    helpers = [m for m in (world_model.vae, world_model.text_encoder, world_model.image_encoder)
               if isinstance(m, torch.nn.Module)]
    assert helpers and not any(m is h for m in policy.modules() for h in helpers)
