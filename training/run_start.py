"""How a training run starts (training/trainer.py, before its first iteration), in the order it happens:

1. `start_run`: everything that can fail cheaply, before the model loads: the reward, the prompts, the process
   group, the output folder, the resume plan and the logs (a W&B run that cannot start, not logged in, fails in
   seconds, not minutes);
2. `build_engine`: the world model, its frozen reference (full fine-tuning with ``beta > 0``) and the DeepSpeed
   engine;
3. `resume_position`: where the iterations start (a checkpoint's, with ``--resume``), and the run's records
   (config.yaml, the scoring model, the launch) written by rank 0.

Each thing opened is set on training/run_end.py ``Opened`` as it opens, so it is closed on every way out.
"""

from __future__ import annotations

import math
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import deepspeed
import numpy as np
import torch
import torch.distributed as dist

from policy.diffusers_model import enable_gradient_checkpointing
from policy.steps import likelihood_steps
from training import engine as ds_engine
from training.collectives import as_rank0_sees
from training.config import ConfigError, PromptSpec, TrainConfig
from training.config_checks import check_world_size
from training.config_io import config_to_dict, write_run_config
from training.data import PromptStream, load_placed_prompts
from training.launches import launch_record, record_launch
from training.lr_schedule import lr_scheduler
from training.metrics_log import MetricsLog
from training.models import build_world_model
from training.process_groups import start_process_group
from training.prompt_stamp import prompt_change_warning, prompt_stamp
from training.provenance import record_scoring
from training.resume import ResumeSource, StateLayout, nothing_to_train, plan_resume, state_layout
from training.run_dir import prepare_output_dir
from training.run_end import Opened
from training.sampler_shift import resolve_shift
from training.wandb_log import require_wandb


@dataclass(frozen=True)
class RunStart:
    """What `start_run` settled, read by the rest of the run."""

    cfg: TrainConfig
    """The launch's config, its sampler shift resolved as rank 0 sees it (one schedule on every rank)."""
    reward_fn: Any
    prompts: list[PromptSpec]
    places: list[str]
    """``PATH:N`` of each prompt, for a failed image (training/prompt_failures.py)."""
    eval_prompts: list[PromptSpec]
    eval_places: list[str]
    device: torch.device
    rank: int
    world: int
    per_rank: int
    """Prompts of an iteration on each rank (whole groups stay on one rank)."""
    out_dir: Path
    ckpt_dir: Path
    source: ResumeSource | None
    """The checkpoint ``--resume`` loads (None: a fresh run)."""
    layout: StateLayout
    log: MetricsLog
    grad_accum: int
    """Micro-batches per optimizer step."""


def start_run(cfg: TrainConfig, opened: Opened, local_rank: int, reward_tokens: dict[str, str] | None,
              reward_settings: Any, reward_tools: Any) -> RunStart:
    """Step 1 (module docstring): the logs set on ``opened`` as they open."""
    from training.rewards import build_reward

    try:
        reward_fn = build_reward(cfg.reward or "", cfg.reward_options, tokens=reward_tokens,
                                 agent_settings=reward_settings, agent_tools=reward_tools)
    except ValueError as exc:  # an unknown reward or option: a config error (exit 2), named by build_reward
        raise ConfigError(str(exc)) from None
    require_wandb(cfg.wandb_project)
    prompts, places = load_placed_prompts(cfg.dataset, cfg.dataset_file)  # places: PATH:N, for a failed image
    eval_prompts, eval_places = (load_placed_prompts(cfg.eval_dataset, cfg.eval_dataset_file, "held-out")
                                 if cfg.eval_every else ([], []))
    use_cuda = cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available())
    if use_cuda:
        torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    start_process_group(use_cuda)  # training/process_groups.py: freed when the run is over
    rank, world = dist.get_rank(), dist.get_world_size()
    check_world_size(cfg, world)
    cfg, shift_note = as_rank0_sees(lambda: resolve_shift(cfg))  # one schedule on every rank; config.yaml records it
    if rank == 0:
        print(shift_note, flush=True)
    per_rank = cfg.prompts_per_iteration // world
    out_dir = Path(cfg.output_dir)
    source = None
    layout = state_layout(cfg)
    removed = prepare_output_dir(cfg, local_rank)  # an earlier run there: refused, or cleared (overwrite_output_dir)
    if rank == 0 and removed:
        print(f"overwrite_output_dir: deleted the earlier run's {', '.join(removed)} in {out_dir}", flush=True)
    if cfg.resume:
        source, changes = plan_resume(cfg, world, layout)
        if rank == 0 and changes:
            print(f"warning: resuming {out_dir} with settings that differ from its saved config.yaml:\n  "
                  + "\n  ".join(changes), file=sys.stderr, flush=True)
        if rank == 0 and (note := nothing_to_train(source.tag, cfg.max_iterations)) is not None:
            print(note, file=sys.stderr, flush=True)
    # before the model loads: a W&B run that cannot start (not logged in) fails in seconds, not minutes
    resume_step = ds_engine.tag_iteration(source.tag) if source is not None else None
    log = opened.log = MetricsLog(out_dir, enabled=rank == 0, tensorboard=cfg.tensorboard, append=cfg.resume,
                                  wandb_project=cfg.wandb_project, config=config_to_dict(cfg),
                                  resume_step=resume_step)
    micro_batches = (per_rank * len(likelihood_steps(cfg.num_steps, cfg.sde_window))
                     * math.ceil(cfg.group_size / cfg.micro_batch))
    return RunStart(cfg=cfg, reward_fn=reward_fn, prompts=prompts, places=places, eval_prompts=eval_prompts,
                    eval_places=eval_places, device=device, rank=rank, world=world, per_rank=per_rank,
                    out_dir=out_dir, ckpt_dir=out_dir / "checkpoints", source=source, layout=layout, log=log,
                    grad_accum=micro_batches // cfg.optimizer_steps_per_epoch)


def build_engine(run: RunStart, opened: Opened) -> tuple[Any, Any]:
    """Step 2 (module docstring): ``(engine, reference)``, the engine set on ``opened``; the reference is None
    with LoRA (its adapters off are the reference) or ``beta = 0``."""
    cfg = run.cfg
    random.seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    world_model = build_world_model(cfg, run.device)
    try:  # the VAE's compression and the patch size fix which sizes work: say so now, not at the first rollout
        world_model.latent_shape(cfg.num_frames, cfg.height, cfg.width)
    except ValueError as exc:
        raise ConfigError(f"{exc} (the {cfg.backend} model's VAE and transformer; set num_frames / height / "
                          "width)") from None
    if cfg.gradient_checkpointing:  # before LoRA wraps the transformer; only forwards under grad recompute
        enable_gradient_checkpointing(world_model.transformer)
    reference = None
    if cfg.finetune == "lora":
        ds_engine.add_lora(world_model, cfg)
    else:
        ds_engine.set_full_finetune(world_model)
        reference = ds_engine.frozen_reference(world_model, cfg) if cfg.beta > 0 else None
    policy = ds_engine.PolicyStep(world_model)
    trainable = [p for p in policy.parameters() if p.requires_grad]
    universal = run.source is not None and run.source.universal
    engine, _, _, _ = deepspeed.initialize(model=policy, model_parameters=trainable, lr_scheduler=lr_scheduler(cfg),
                                           config=ds_engine.deepspeed_config(cfg, run.grad_accum,
                                                                             load_universal=universal))
    opened.engine = engine
    return engine, reference


def resume_position(run: RunStart, engine: Any, reward_settings: Any) -> tuple[int, PromptStream, dict[str, Any], int]:
    """Step 3 (module docstring): ``(start, stream, stamp, skipped)``: the first iteration to train, the prompt
    order at its data position, what that position counts in (training/prompt_stamp.py), and the iterations in a
    row without an update (``max_skipped_iterations``), counted on from the checkpoint."""
    cfg, rank, ckpt_dir, log = run.cfg, run.rank, run.ckpt_dir, run.log
    stream = PromptStream(len(run.prompts), cfg.seed, order=cfg.prompt_order)
    stamp = prompt_stamp(run.prompts, cfg.dataset_file)  # what the saved data position counts in
    start = skipped = 0
    if run.source is not None:
        start, stream.position, skipped = ds_engine.load(engine, ckpt_dir, run.source.tag,
                                                         learning_rate=cfg.learning_rate,
                                                         weight_decay=cfg.weight_decay,
                                                         max_iterations=cfg.max_iterations)
        saved_in = ckpt_dir / run.source.tag.removesuffix(ds_engine.UNIVERSAL_SUFFIX)
        if rank == 0 and (warning := prompt_change_warning(saved_in, stamp)):  # training/prompt_stamp.py
            print(warning, file=sys.stderr, flush=True)
        if dropped := log.trim_after(start):  # a crashed attempt's rows past the checkpoint: written again
            print(f"resume from iteration {start}: dropped later log lines {dropped}", flush=True)
    if rank == 0:  # the launch's resolved config: what `python -m training.export --run` rebuilds the model from
        write_run_config(run.out_dir, cfg)  # file settings as absolute paths (config_io.absolute_paths)
        for note in record_scoring(run.out_dir, run.reward_fn, reward_settings, resume=cfg.resume):
            print(note, flush=True)  # training/provenance.py: which model scored the rewards
        record_launch(run.out_dir, launch_record(start_iteration=start, resume=cfg.resume, world_size=run.world,
                                                 argv=sys.argv), resume=cfg.resume)  # training/launches.py: which code
    return start, stream, stamp, skipped
