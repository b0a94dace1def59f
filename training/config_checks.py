"""Checks of a training configuration (`training.config.TrainConfig`): `validate` lists every problem of its
values in one :class:`~training.config.ConfigError` before any model is loaded; `check_world_size` is the one
check that needs the launch (the number of ranks). A run's saved config (``validate(cfg, saved=True)``) skips
`launch_problems`: values refused since, which earlier runs trained with, and which an export of such a run,
``generate`` or a resume's list of changes must still read as trained (a launch that keeps one is refused)."""

from __future__ import annotations

import math
from typing import get_args

from policy.steps import likelihood_steps
from tools.video_rate import fps_problem
from training.config import ConfigError, RewardName, TrainConfig
from training.prompt_checks import blank_file_problem, is_blank_file, prompt_problems


def validate(cfg: TrainConfig, saved: bool = False) -> TrainConfig:
    """Check every value; raise ConfigError listing all problems. Pure (touches no file or model). With ``saved``
    (a run's saved config, read as trained) without `launch_problems`."""
    errs: list[str] = []
    if not 0.0 < cfg.tau < 1.0:
        errs.append(f"tau must be in (0, 1), got {cfg.tau}")
    if not 0.0 < cfg.r_base <= 1.0:
        errs.append(f"r_base must be in (0, 1], got {cfg.r_base}")
    if cfg.group_size < 2:
        errs.append(f"group_size must be >= 2 (GRPO needs a group), got {cfg.group_size}")
    if cfg.lr_warmup_steps < 0:
        errs.append(f"lr_warmup_steps must be >= 0 (0: no warmup), got {cfg.lr_warmup_steps}")
    if not 0.0 <= cfg.min_lr_ratio <= 1.0:
        errs.append(f"min_lr_ratio must be in [0, 1], got {cfg.min_lr_ratio}")
    if cfg.max_skipped_iterations is not None and cfg.max_skipped_iterations < 1:
        errs.append(f"max_skipped_iterations must be >= 1 (or none: never stop), got {cfg.max_skipped_iterations}")
    if cfg.keep_checkpoints is not None and cfg.keep_checkpoints < 1:
        errs.append(f"keep_checkpoints must be >= 1 (or none: keep all), got {cfg.keep_checkpoints}")
    if cfg.rollout_batch is not None and cfg.rollout_batch < 1:
        errs.append(f"rollout_batch must be >= 1 (or none: the whole group), got {cfg.rollout_batch}")
    if cfg.num_steps < 1:
        errs.append(f"num_steps must be >= 1, got {cfg.num_steps}")
    if not 0 <= cfg.seed < 2**32:  # the prompt order and the rollout noise seed numpy, which refuses others
        errs.append(f"seed must be >= 0 and < 2**32 (numpy's seed range), got {cfg.seed}")
    start, end = cfg.sde_window
    if not 0 <= start < end <= cfg.num_steps:
        errs.append(f"sde_window {list(cfg.sde_window)} must satisfy 0 <= start < end <= num_steps "
                    f"({cfg.num_steps}) (half-open range of step indices)")
    elif start >= cfg.num_steps - 1:
        errs.append(f"sde_window {list(cfg.sde_window)} holds only the last step, whose noise level goes to 0 "
                    "(no exploration, nothing to learn from): " + (f"start it before step {cfg.num_steps - 1}"
                    if cfg.num_steps > 1 else "set num_steps >= 2"))
    if cfg.reward is None:
        errs.append(f"reward is missing: set reward to one of {', '.join(get_args(RewardName))}")
    if not cfg.tiny and not cfg.model_path:
        errs.append("model_path is required unless tiny is true")
    if cfg.model_revision is not None and not cfg.model_revision.strip():
        errs.append("model_revision must be a non-empty branch, tag or commit (or none: the default branch)")
    errs += [blank_file_problem(name) for name in ("dataset_file", "eval_dataset_file")
             if is_blank_file(getattr(cfg, name))]
    if not cfg.dataset and cfg.dataset_file is None:
        errs.append("no prompts: set dataset (list of {text, image?}) or dataset_file")
    errs += [f"{name}[{i}]: {problem}" for name in ("dataset", "eval_dataset")
             for i, spec in enumerate(getattr(cfg, name)) for problem in prompt_problems(spec)]
    if cfg.eval_patience is not None and (cfg.eval_patience < 1 or not cfg.eval_every):
        errs.append(f"eval_patience needs eval_every > 0 and must be >= 1, got {cfg.eval_patience} with "
                    f"eval_every {cfg.eval_every}")
    if cfg.resume and cfg.overwrite_output_dir:
        errs.append("resume continues the run in output_dir and overwrite_output_dir deletes it: set one")
    if cfg.rollout_videos_every < 0:
        errs.append(f"rollout_videos_every must be >= 0 (0 = never), got {cfg.rollout_videos_every}")
    if cfg.eval_every < 0 or cfg.eval_samples < 1:
        errs.append(f"eval_every must be >= 0 and eval_samples >= 1, got {cfg.eval_every} and {cfg.eval_samples}")
    if cfg.eval_every and not cfg.eval_dataset and not cfg.eval_dataset_file:
        errs.append("eval_every needs held-out prompts: set eval_dataset or eval_dataset_file")
    positive = {"prompts_per_iteration": cfg.prompts_per_iteration, "inner_epochs": cfg.inner_epochs,
                "micro_batch": cfg.micro_batch, "optimizer_steps_per_epoch": cfg.optimizer_steps_per_epoch,
                "max_iterations": cfg.max_iterations, "checkpoint_every": cfg.checkpoint_every,
                "height": cfg.height, "width": cfg.width, "num_frames": cfg.num_frames}
    errs += [f"{k} must be >= 1, got {v}" for k, v in positive.items() if v < 1]
    if not 0 <= cfg.guidance_scale < math.inf:
        errs.append(f"guidance_scale must be finite and >= 0, got {cfg.guidance_scale}")
    for name in ("clip_range", "a_max", "max_log_ratio", "mu_kl_eps", "adv_eps", "learning_rate", "shift"):
        value, finite = getattr(cfg, name), name not in ("clip_range", "a_max")  # an infinite clip clips nothing
        if value is None and name == "shift":  # the checkpoint's (training/sampler_shift.py)
            continue
        if not value > 0 or (finite and value == math.inf):
            errs.append(f"{name} must be > 0{' and finite' if finite else ''}, got {value}")
    if cfg.reward_timeout_s is not None and not 0 < cfg.reward_timeout_s < math.inf:
        errs.append(f"reward_timeout_s must be > 0 and finite (or none: no limit), got {cfg.reward_timeout_s}")
    if (problem := fps_problem(cfg.fps)) is not None:  # the rollout / held-out / reward clips' writer refuses it
        errs.append(problem)
    for name in ("beta", "weight_decay"):  # an infinite beta made the loss inf * 0 = NaN: a false divergence
        if not 0 <= getattr(cfg, name) < math.inf:
            errs.append(f"{name} must be >= 0 and finite, got {getattr(cfg, name)}")
    if cfg.finetune == "lora" and (cfg.lora_rank < 1 or not cfg.lora_targets):
        errs.append("lora needs lora_rank >= 1 and at least one lora_targets entry")
    if cfg.finetune == "lora" and not 0 < cfg.lora_alpha < math.inf:  # the adapter's scale, alpha / rank
        errs.append(f"lora_alpha must be > 0 and finite with finetune lora, got {cfg.lora_alpha}")
    if cfg.zero_stage is not None and cfg.zero_stage not in (0, 1, 2, 3):
        errs.append(f"zero_stage must be 0, 1, 2 or 3, got {cfg.zero_stage}")
    n_mb = 0  # a micro_batch or optimizer_steps_per_epoch below 1 is listed above; dividing by 0 crashed here
    if cfg.micro_batch >= 1 and cfg.optimizer_steps_per_epoch >= 1:
        n_mb = -(-cfg.group_size // cfg.micro_batch) * len(likelihood_steps(cfg.num_steps, cfg.sde_window))
    if n_mb and n_mb % cfg.optimizer_steps_per_epoch:
        errs.append(f"optimizer_steps_per_epoch ({cfg.optimizer_steps_per_epoch}) must divide the "
                    f"micro-batches per prompt per epoch ({n_mb} = ceil(G/micro_batch) * SDE steps)")
    if not saved:
        errs += launch_problems(cfg)
    if errs:
        raise ConfigError("invalid training config:\n  - " + "\n  - ".join(errs))
    return cfg


def launch_problems(cfg: TrainConfig) -> list[str]:
    """The problems of values that earlier code accepted and trained with, refused for a launch (a new run or a
    resume) but not in a run's saved config: refusing them there made such a run impossible to export or sample."""
    errs: list[str] = []
    if 1 <= cfg.clip_range < math.inf:  # rho > 0: clip(rho, 1 - d, 1 + d) would clip rho only from above
        errs.append(f"clip_range must be below 1 (or inf: no clipping), got {cfg.clip_range}: the lower clip bound "
                    "1 - clip_range is <= 0, which the ratio never reaches, so only ratios above 1 + clip_range "
                    "would be clipped (PPO's delta is e.g. 0.2)")
    if not cfg.output_dir.strip():  # an unset shell variable ("$OUT"): the run went into the current directory
        errs.append(f"output_dir must name a folder (. for the current directory), got {cfg.output_dir!r}")
    return errs


def check_world_size(cfg: TrainConfig, world: int) -> None:
    """ConfigError unless ``world`` ranks can split ``prompts_per_iteration`` evenly (checked at launch)."""
    if cfg.prompts_per_iteration % world:
        raise ConfigError(f"prompts_per_iteration ({cfg.prompts_per_iteration}) must be divisible by the "
                          f"number of ranks ({world})")
