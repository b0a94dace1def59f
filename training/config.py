"""Training configuration: one dataclass (a docstring per field) and its validation.

:func:`training.config_checks.validate` raises :class:`ConfigError` listing every problem, *before* any model
is loaded.
Reading a config from YAML and ``--field value`` overrides, and writing one back, is in
``training.config_io``.

Decisions where the issue was silent: ``sde_window`` is half-open ``[start, end)`` over step
indices 0..num_steps-1; ``prompts_per_iteration`` is global (split evenly over ranks, checked at
launch); a ``ds_config`` without a directory refers to the bundled ``training/configs/`` file
(read by ``training.ds_config``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeGuard, get_args

RewardName = Literal["brightness", "motion", "agent", "http", "sum"]
LRSchedule = Literal["constant", "linear", "cosine"]
Dtype = Literal["float32", "bfloat16", "float16"]


def is_dtype(name: object) -> TypeGuard[Dtype]:
    """Whether ``name`` is one of the run dtypes (`TrainConfig.dtype`), e.g. one a checkpoint's layout.json records."""
    return name in get_args(Dtype)
"""`TrainConfig.lr_schedule`: the learning rate after the warmup."""


class ConfigError(ValueError):
    """An invalid training configuration (raised before any model loads)."""


@dataclass
class PromptSpec:
    """One training prompt: an initial frame and a task text."""

    text: str
    """Task instruction given to the world model and to the reward."""
    image: str | None = None
    """Path to the initial RGB frame; None -> a seeded synthetic frame (tests / smoke runs)."""
    image_seed: int = 0
    """Seed of the synthetic initial frame when ``image`` is None."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Other fields of the prompt (in a JSONL file: every key but text / image / image_seed), e.g. a
    PAI-Bench task and its VQA questions; training ignores them, training.generate copies them into
    its manifest rows (so ``raa eval world-model`` can read that manifest)."""


@dataclass
class TrainConfig:
    """Every setting of a DynDiff-GRPO run (DESIGN.md §6)."""

    # --- model -----------------------------------------------------------------------------
    backend: Literal["cosmos", "wan"] = "cosmos"
    """World-model backend: diffusers CosmosTransformer3DModel or WanTransformer3DModel."""
    model_path: str | None = None
    """Local directory or hub id of the pretrained model (ignored when ``tiny``)."""
    model_revision: str | None = None
    """Hub revision (branch, tag or commit) of a hub-id ``model_path``, given to every part's ``from_pretrained``
    and to the launch check's cache lookup; None: the repository's default branch. A commit pins the base
    weights (a branch can move under a resumed run; a resume cannot change this field). Refused with a
    local folder, which has no revisions (download a revision with ``hf download ID --revision REV``)."""
    tiny: bool = False
    """Build a tiny randomly initialised model of the backend's real classes (CPU tests)."""
    dtype: Dtype = "float32"
    """Parameter dtype of the world model (bf16 for the GPU recipes)."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """auto: cuda when available (one GPU per rank), else cpu with the gloo backend."""
    finetune: Literal["lora", "full"] = "lora"
    """lora: peft adapters on the transformer, reference = adapters disabled; full: all transformer
    weights train, reference = a frozen deep copy."""
    lora_rank: int = 32
    """LoRA rank r."""
    lora_alpha: float = 32.0
    """LoRA scaling alpha (effective scale alpha / r)."""
    lora_targets: list[str] = field(default_factory=lambda: ["to_q", "to_k", "to_v", "to_out.0"])
    """Module-name suffixes of the transformer that get LoRA adapters."""
    gradient_checkpointing: bool = False
    """Recompute each transformer block's activations during the backward pass (diffusers'
    ``enable_gradient_checkpointing``, non-reentrant) instead of keeping them from the forward: the
    policy-gradient forward of a full-size video keeps activations of every block otherwise. Costs
    about one extra transformer forward per update; gradients are unchanged. Rollouts, held-out
    samples and the reference run without gradients and are not affected."""
    text_encoder: Literal["resident", "offload"] = "resident"
    """Where the text encoder waits between uses. resident: on the training device for the whole run.
    offload: in host memory, moved to the device only while prompts are encoded (each iteration's
    rollout prompts, the held-out prompts), so rollouts and updates get its memory back (Qwen2.5-VL-7B
    of Cosmos-Predict2.5 in bf16: ~16 GB per GPU; UMT5-XXL of Wan 2.2: ~11 GB) for one copy of its
    weights to the device and back per use. Wan 2.1 I2V's CLIP image encoder goes with it. The prompt features
    are the same either way."""
    # --- rollout (policy/rollout.py RolloutConfig) -------------------------------------------
    num_steps: int = 10
    """Denoising steps K per rollout."""
    sde_window: tuple[int, int] = (0, 4)
    """Half-open range [start, end) of step indices that are stochastic (SDE); others are ODE. The last step
    (noise level 0) may be in it but is deterministic and not trained on; a window of only it is refused."""
    tau: float = 0.8
    """Quantile of the dynamic map D above which B = 1 (in (0, 1))."""
    r_base: float = 0.3
    """Minimum exploration ratio of the dynamic mask M (in (0, 1])."""
    shift: float | None = None
    """Timestep shift of the sigma schedule, sigma = shift t / (1 + (shift - 1) t) (1.0 = uniform). None: the
    checkpoint scheduler's (Wan 2.2 TI2V-5B 5.0, Wan 2.1 I2V 480P 3.0), else 3.0 (tiny; Cosmos-Predict2.5's Karras
    schedule has none); a resume keeps the run's. Printed at launch, recorded in config.yaml (training/sampler_shift.py)."""
    mask_grad: Literal["detached", "differentiable"] = "detached"
    """Whether the update back-propagates through the continuous part of the current dynamic mask."""
    mask_history: Literal["window", "trajectory"] = "window"
    """Where D = B = 0: at the SDE window's first step (window) or only at step 0 (trajectory)."""
    ratio_mask: Literal["own", "rollout"] = "own"
    """Mask of the update's log-prob. "own": the current policy's own mask, as DESIGN.md §6 and the paper
    (the binary part B can flip near its quantile, several nats per flipped position; see the logged
    ``mask_flip_fraction``). "rollout": reuse the rollout's binary part B and recompute the continuous D
    from the current policy: more stable ratios when inner_epochs or optimizer_steps_per_epoch > 1 or when
    the recompute is not bit-identical (e.g. bf16 with another micro-batch). The mask also sets the step's
    mean, so the mu-KL term (policy and reference means) uses the same B. It does not stop ratios drifting
    because the mean itself moved (a large learning rate)."""
    guidance_scale: float = 1.0
    """Classifier-free guidance weight w of rollouts, likelihoods and evaluation samples,
    v = v_neg + w (v_cond - v_neg); 1 = off (one transformer pass per step, else a doubled batch). Wan's
    pipeline uses the same w; Cosmos-Predict2.5's writes v = v_cond + g (v_cond - v_neg), so its
    guidance_scale g is w = g + 1 here (its 7.0 is 8.0). Both pipelines guide only when their scale is above 1
    (Cosmos' g <= 1 is w = 1); here any w != 1 is applied as written (0 = the negative branch alone)."""
    negative_prompt: str = ""
    """Text of the guidance's negative branch (used when guidance_scale != 1). Wan's pipeline also defaults to "";
    Cosmos-Predict2.5's uses its long ``DEFAULT_NEGATIVE_PROMPT`` (diffusers): set that here to sample as it does."""
    # --- GRPO -------------------------------------------------------------------------------
    group_size: int = 8
    """Rollouts G per prompt (one GRPO group)."""
    rollout_batch: int | None = None
    """Rollouts of a group sampled together (one transformer batch); None: the whole group. Lower it when
    a group's rollouts do not fit in GPU memory (``micro_batch`` only sizes the update). Each chunk draws
    its own seeded noise, so the samples differ from a whole-group run's (same distribution)."""
    prompts_per_iteration: int = 2
    """Prompts per iteration over all ranks (must divide evenly by the number of ranks)."""
    inner_epochs: int = 1
    """Passes over the collected (sample, SDE step) items per iteration."""
    micro_batch: int = 1
    """Samples of one group at one SDE step per forward/backward (DeepSpeed micro-batch)."""
    optimizer_steps_per_epoch: int = 1
    """Optimizer steps per inner epoch; gradient_accumulation_steps = micro-batches / this."""
    clip_range: float = 0.2
    """PPO clip delta of the importance ratio: in (0, 1), or inf (no clipping); at 1 or more the lower bound
    ``1 - clip_range`` never acts, so it is refused."""
    max_log_ratio: float = 20.0
    """Bound on |log rho| before ``exp`` (training/grpo.py ``clipped_policy_loss``): a log-prob summed over the
    latents cannot overflow rho. > 0 and finite (an infinite one bounds nothing: rho = inf, a NaN loss)."""
    beta: float = 0.01
    """Weight of the mu-KL regulariser."""
    mu_kl_eps: float = 1e-6
    """eps in (mu - mu_ref) / (sigma_ref + eps)."""
    a_max: float = 5.0
    """Advantages are clipped to [-a_max, a_max]."""
    adv_eps: float = 1e-4
    """eps added to the group std in the advantage; > 0 (with 0 a spread just above rounding noise would
    become full-size advantages)."""
    log_prob_reduce: Literal["sum", "mean"] = "sum"
    """Transition log-likelihood: sum over latent elements (paper) or mean (smaller ratios)."""
    # --- optimisation / DeepSpeed -----------------------------------------------------------
    learning_rate: float = 1e-4
    """AdamW learning rate (written into the DeepSpeed optimizer params)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    lr_warmup_steps: int = 0
    """Linear learning-rate warmup over this many optimizer steps (an iteration takes
    ``inner_epochs * optimizer_steps_per_epoch``, none when it skips its update): step k (0-based) uses
    ``learning_rate * min(1, (k + 1) / lr_warmup_steps)``, then as ``lr_schedule`` says. 0: no warmup. A
    resume goes on from the checkpoint's step count, with the launch's ``learning_rate``."""
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"
    """After the warmup: constant, or decaying from ``learning_rate`` to ``min_lr_ratio * learning_rate``
    over the rest of the run's optimizer steps (``max_iterations * inner_epochs * optimizer_steps_per_epoch``),
    linearly or along a half cosine (`training.lr_schedule.lr_factor`). The position is the optimizer steps
    taken, so iterations that skip their update delay the decay (as do fp16 steps DeepSpeed skips on overflow,
    after a resume too: `training.lr_schedule.schedule_position`); a resume with another ``max_iterations``
    stretches (or shrinks) what is left of it over the new remaining steps, going on from the rate reached (as one
    that switches linear and cosine does, along the new curve; a
    finished decay stays at its end; at ``min_lr_ratio`` 0 that resume is refused, its added steps would train at
    rate 0), as the checkpoint recorded (training/lr_schedule.py)."""
    min_lr_ratio: float = 0.0
    """Where ``lr_schedule: linear | cosine`` ends, as a fraction of ``learning_rate`` (0 to 1)."""
    ds_config: str = "ds_zero2.json"
    """DeepSpeed JSON; a bare file name refers to training/configs/ (ds_zero2.json, ds_zero3.json)."""
    zero_stage: int | None = None
    """Overrides zero_optimization.stage of the JSON when set (0-3). Stage 3 over ds_zero2.json keeps each tensor
    under DeepSpeed's default ``stage3_param_persistence_threshold`` (1e5 elements) whole on every rank;
    ds_zero3.json sets it to 0 and partitions every parameter."""
    # --- loop, checkpoints, logs ------------------------------------------------------------
    max_iterations: int = 100
    """Stop after this many iterations (counting those done before a resume)."""
    checkpoint_every: int = 10
    """Save a DeepSpeed checkpoint every N iterations (and after the last one)."""
    nonfinite_loss: Literal["stop", "skip"] = "stop"
    """An update loss or rollout latents NaN or inf mean the policy has diverged. "stop": the iteration's
    metrics are written (``nonfinite_losses``) and the run ends with an error naming the last checkpoint,
    before saving the diverged weights; "skip": go on (DeepSpeed skips optimizer steps whose
    gradients are not finite, but the rollouts of a diverged policy stay garbage)."""
    max_skipped_iterations: int | None = None
    """Stop after this many iterations in a row without an update (no rank had a valid sample: every
    reward ineligible, or fewer than 2 eligible per group), as when the reward endpoint or tool service
    is down: a checkpoint is saved, the reasons are printed, and the run exits with status 3, to be
    continued with ``--resume`` once the reward works (the count goes on from the checkpoint, across
    preemptions too). None: never stop for
    this (each such iteration still prints why)."""
    on_signal: Literal["checkpoint", "exit"] = "checkpoint"
    """SIGTERM or SIGUSR1, what cluster schedulers send before they preempt a job (SLURM: ``--signal``).
    "checkpoint": every rank finishes the iteration it is in, a checkpoint is saved and the run exits with
    128 + the signal's number, to be continued with ``--resume`` (later ones are ignored; SIGINT ends it at once);
    "exit": Python's default handling (the process ends; the work since the last checkpoint is lost)."""
    keep_checkpoints: int | None = None
    """Keep only the newest N checkpoints in output_dir/checkpoints (older ones are deleted after each
    save; the one ``latest`` names always stays); None: keep all. A checkpoint holds the whole module
    and the optimizer state: ~30 GB for a full fine-tune of a 2B model."""
    output_dir: str = "runs/train"
    """Checkpoints, metrics.jsonl, TensorBoard events, config.yaml and the exported policy go here."""
    export: Literal["final", "none"] = "final"
    """final: after the last iteration rank 0 writes the trained policy to output_dir/final in the
    formats peft / diffusers load (training/export.py; sample it with training/generate.py); none: only
    DeepSpeed checkpoints (export later with python -m training.export)."""
    resume: bool = False
    """Continue from the latest checkpoint in output_dir (iteration, RNG, data position, optimizer)."""
    overwrite_output_dir: bool = False
    """A fresh run (no ``--resume``) into an output_dir that holds an earlier run's checkpoints, final/ or
    metrics.jsonl rows is refused;
    true starts over in it, deleting that run's checkpoints/, final/, export-TAG/ exports, rollout_videos/,
    eval_videos/ and tensorboard/ first (training/run_dir.py)."""
    seed: int = 0
    """Seed of prompt order, rollout noise and initialisation (>= 0 and < 2**32, numpy's range)."""
    prompt_order: Literal["derived", "seed_plus_epoch"] = "derived"
    """How each epoch's prompt order is drawn (training/data.py): "derived" from (seed, epoch) on a stream of
    its own; "seed_plus_epoch" from seed + epoch, the order of runs saved before this field (seed s + 1 then
    drew epoch e + 1's order of seed s: a seed sweep saw one sequence shifted by an epoch)."""
    tensorboard: bool = True
    """Write TensorBoard events to output_dir/tensorboard (rank 0)."""
    wandb_project: str | None = None
    """Also log the metrics and held-out evaluations to this Weights & Biases project (rank 0; needs
    ``pip install wandb``); None: off. The run is named after output_dir and ``--resume`` continues it.
    Account, entity and online/offline mode are wandb's own settings (``wandb login``, WANDB_ENTITY,
    WANDB_MODE=offline on nodes without network, then ``wandb sync``)."""
    progress: bool = True
    """Show a progress bar on rank 0 (the reward mean, ``kl_ref`` when beta > 0 and ``kl_old`` when an iteration
    takes more than one optimizer step: `training.metrics.progress_postfix`)."""
    # --- reward -----------------------------------------------------------------------------
    reward: RewardName | None = None
    """Reward adapter: brightness / motion (verifiable, on decoded frames), agent (graph.ascore_videos
    in process), http (reward service) or sum (a weighted sum of those, training/sum_reward.py). Required."""
    reward_options: dict[str, Any] = field(default_factory=dict)
    """Keyword options of the adapter (see training/rewards.py)."""
    reward_overlap: Literal["groups", "off"] = "groups"
    """When rewards are scored (training/reward_runner.py): "groups" sends each prompt group's clips to the
    reward as soon as they are decoded, so they are scored while the next group is sampled (the same
    rewards; the GPU does not wait for the reward agent); "off" scores the rank's whole batch after
    the last rollout (one reward call per iteration; less GPU memory when the reward's own models share
    the training GPU)."""
    reward_timeout_s: float | None = 3600.0
    """Seconds one reward call (a prompt group's, or the rank's batch with reward_overlap off) may take, from when
    it is sent (waiting behind earlier groups for the agent's max_concurrency included); past it the call's clips
    are ineligible ("reward NAME timed out after N s", counted as ineligible_error) and the run goes on
    (training/reward_runner.py). An async reward (the agent, http) is cancelled then; a sync one cannot be
    stopped: its thread is abandoned, and while 8 are stuck further calls are refused with a reason
    (training/reward_threads.py). Default one hour: an agent batch legitimately takes minutes (VLM calls for
    every clip), so an hour never cuts a healthy one and bounds what a hung reward costs to one iteration's
    rewards instead of the whole run. None: wait as long as the reward takes (before this field: always)."""
    # --- data / video -----------------------------------------------------------------------
    dataset: list[PromptSpec] = field(default_factory=list)
    """Training prompts (initial frame + text)."""
    dataset_file: str | None = None
    """JSONL of prompts ({"text", "image"?, "image_seed"?}); appended to ``dataset``."""
    height: int = 480
    """Video height in pixels: a multiple of the VAE's spatial compression times the transformer's patch
    (16 for Cosmos-Predict2.5 and the tiny models, 32 for Wan 2.2 TI2V; checked once the model is built)."""
    width: int = 832
    """Video width in pixels (a multiple of the same, as height)."""
    image_fit: Literal["crop", "stretch"] = "crop"
    """How a prompt image of another aspect ratio becomes height x width: "crop" scales it to cover the
    frame and keeps the centre (the scene keeps its geometry), "stretch" resizes it to the frame."""
    num_frames: int = 21
    """Frames per generated clip (including the conditioning frame): 1 + 4k with k >= 1 for the Wan VAEs
    (the conditioning frame plus at least one generated latent frame; checked once the model is built)."""
    fps: float = 16.0
    """Frame rate passed to the reward with the decoded clip; above 1/2002, below 2**31 (`tools.video_rate`)."""
    eval_every: int = 0
    """Held-out evaluation (training/evaluate.py) before the first iteration, every N iterations and after
    the last: deterministic ODE samples of the eval prompts, scored by the run's reward, logged to
    output_dir/eval.jsonl; 0 = never."""
    eval_dataset: list[PromptSpec] = field(default_factory=list)
    """Held-out prompts (initial frame + text) for eval_every."""
    eval_dataset_file: str | None = None
    """JSONL of held-out prompts, appended to ``eval_dataset``."""
    eval_samples: int = 1
    """ODE samples per held-out prompt; each (prompt, sample) keeps its noise at every evaluation."""
    eval_videos: Literal["none", "save"] = "none"
    """save: every evaluation writes its samples to ``output_dir/eval_videos/iter_NNNNNN/pPPP_sSS.mp4``
    (each rank its own) and, with wandb_project, uploads those rank 0 can read; one file name is the same
    (prompt, noise) at every evaluation. Per-sample rewards go to eval_rewards.jsonl either way."""
    eval_patience: int | None = None
    """Stop after this many held-out evaluations in a row without a new best ``eval_reward_mean``
    (training/best.py): the run checkpoints, exports as usual and exits 0, naming the best checkpoint;
    None = run to max_iterations."""
    rollout_videos_every: int = 0
    """Every N-th iteration each rank writes its rollouts to ``output_dir/rollout_videos/iter_NNNNNN/``
    (``rR_gG_sSS.mp4``), named in that iteration's rewards.jsonl lines with reward and advantage, to see
    what the reward ranked within each group (training/videos.py; written while the update runs); 0 = never."""
    decode: Literal["vae", "preview"] = "vae"
    """How rollouts become frames for the reward: the model's VAE (default; the tiny test VAE has a
    responsive seeded init, see policy/vae.py), or the fixed linear latent->RGB preview of
    training/preview.py (a fast alternative)."""

