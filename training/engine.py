"""DeepSpeed plumbing for the trainer: the engine's JSON, the trainable policy module, checkpoints.

* :func:`deepspeed_config` -- the JSON file plus the run's values (micro-batch, accumulation steps,
  learning rate, ZeRO stage). ``gradient_clipping`` stays whatever the JSON says.
* :class:`PolicyStep` -- the module handed to ``deepspeed.initialize``; its forward recomputes one
  SDE transition's log-prob, mean and std (``policy.rollout.step_log_prob``), so every gradient pass
  goes through ``engine(...)`` (ZeRO-3 gathers parameters in its forward hooks).
* :func:`add_lora` / :func:`frozen_reference` -- LoRA via peft (reference = adapters disabled) or a
  frozen deep copy for full fine-tuning, in the engine's precision (a bf16 engine casts every
  parameter, Wan's ``_keep_in_fp32_modules`` too; training/numerics.py says why the copy follows it).
* :func:`save` / :func:`load` -- ``engine.save_checkpoint`` on every rank with client state
  (iteration, data position, the iterations in a row without an update so far (``max_skipped_iterations``
  counts on across a resume: a run preempted more often than every N iterations otherwise never stopped),
  every rank's torch / numpy / python RNG states), into a folder cleared of an
  earlier, unfinished attempt at the same tag (:func:`clear_unfinished`); what ``--resume`` loads
  is picked in training/resume.py. ``latest`` is written by :func:`mark_latest` once every rank has
  written its files (and atomically): DeepSpeed's own ``save_latest`` writes it on rank 0 as soon as
  rank 0's files are done, with no barrier, and in place, so a kill or a full disk on another rank left
  ``latest`` naming a torn checkpoint (or an empty file) that ``--resume`` then loaded.
* :func:`prune` / :func:`stale_checkpoints` -- ``keep_checkpoints``: delete all but the newest N
  ``iter_NNNNNN`` folders once every rank has finished writing (each node's local rank 0 deletes, so
  node-local checkpoint folders are pruned too; other files in the folder are left alone). A save killed
  part-way (`training.run_dir.unfinished_checkpoints`: no ``layout.json``) neither counts nor is deleted: it
  took one of the N places, so a finished checkpoint was deleted while the broken folder, which nothing can
  resume, was kept; :func:`clear_unfinished` deletes it when its tag is saved again.

Decisions where the issue was silent: the JSON's ``train_batch_size`` is dropped (DeepSpeed derives
it from micro-batch x accumulation x world size); RNG states of all ranks are gathered into the
client state because DeepSpeed stores client state once (rank 0's model-states file).
"""

from __future__ import annotations

import copy
import os
import random
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from policy.conditioning import Conditioning
from policy.rollout import RolloutConfig, SDEStepRecord, step_log_prob
from policy.world_model import FlowWorldModel
from training.config import ConfigError, TrainConfig
from training.ds_config import check_ds_json, read_ds_config
from training.lr_schedule import apply_optimizer_settings, schedule_state
from training.numerics import cast_like_engine
from training.run_dir import UNIVERSAL_SUFFIX, read_latest


def deepspeed_config(cfg: TrainConfig, grad_accum_steps: int, *, load_universal: bool = False) -> dict[str, Any]:
    """DeepSpeed JSON of ``cfg.ds_config`` with this run's batch, accumulation, lr and stage;
    ``load_universal``: the engine will load a universal checkpoint (training.resume.ResumeSource)."""
    ds = read_ds_config(cfg.ds_config)
    check_ds_json(ds, cfg.dtype, cfg.ds_config)  # training.train checks it before the model loads too
    ds.pop("train_batch_size", None)
    ds["train_micro_batch_size_per_gpu"] = cfg.micro_batch
    ds["gradient_accumulation_steps"] = grad_accum_steps
    opt = ds.setdefault("optimizer", {"type": "AdamW", "params": {}})
    opt.setdefault("params", {})
    opt["params"]["lr"] = cfg.learning_rate
    opt["params"]["weight_decay"] = cfg.weight_decay
    if cfg.zero_stage is not None:
        ds.setdefault("zero_optimization", {})["stage"] = cfg.zero_stage
    if cfg.dtype == "bfloat16":
        ds["bf16"] = {"enabled": True}
    elif cfg.dtype == "float16":
        ds["fp16"] = {"enabled": True}
    if load_universal:
        ds.setdefault("checkpoint", {})["load_universal"] = True
    return ds


class PolicyStep(torch.nn.Module):
    """Wraps the world model; forward = the current policy's Gaussian at one recorded SDE step."""

    def __init__(self, world_model: FlowWorldModel) -> None:
        super().__init__()
        self.world_model = world_model

    def forward(self, cond: Conditioning, record: SDEStepRecord, config: RolloutConfig
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        return step_log_prob(self.world_model, cond, record, config)


def add_lora(world_model: FlowWorldModel, cfg: TrainConfig) -> None:
    """Replace the transformer by a peft LoRA model (only adapter weights train)."""
    from peft import LoraConfig, get_peft_model

    check_lora_targets(world_model.transformer, cfg.lora_targets)
    for p in world_model.parameters():
        p.requires_grad_(False)
    # peft annotates lora_alpha as int but only divides by it (scaling alpha / r): a float alpha works as given
    lora = LoraConfig(r=cfg.lora_rank, lora_alpha=cfg.lora_alpha,  # type: ignore[arg-type]
                      target_modules=list(cfg.lora_targets), init_lora_weights=True)
    world_model.transformer = get_peft_model(world_model.transformer, lora)


def check_lora_targets(module: torch.nn.Module, targets: Sequence[str]) -> None:
    """ConfigError naming every target that matches no module of ``module`` (peft matches a name or a
    ``.``-suffix of one). peft itself fails only when no target matches, so a typo in one of four
    targets trained fewer adapters without a word."""
    names = [name for name, _ in module.named_modules() if name]
    missing = [t for t in targets if not any(n == t or n.endswith("." + t) for n in names)]
    if missing:
        def tail(name: str) -> str:  # "blocks.0.attn1.to_out.0" -> "to_out.0"
            parts = name.split(".")
            return ".".join(parts[-2:]) if parts[-1].isdigit() and len(parts) > 1 else parts[-1]

        linear = sorted({tail(n) for n, m in module.named_modules() if isinstance(m, torch.nn.Linear)})
        raise ConfigError(f"lora_targets {missing} match no module of the {type(module).__name__}; its linear "
                          f"layers end in: {', '.join(linear[:30])}")


def set_full_finetune(world_model: FlowWorldModel) -> None:
    """Only the transformer trains (VAE and text encoder stay frozen)."""
    for p in world_model.parameters():
        p.requires_grad_(False)
    for p in world_model.transformer.parameters():
        p.requires_grad_(True)


def frozen_reference(world_model: FlowWorldModel, cfg: TrainConfig) -> PolicyStep:
    """A frozen copy of the initial policy (full fine-tuning reference): a deep copy of the
    transformer only (the reference needs velocities, never the VAE or the text encoder), in the
    precision the engine gives the policy (training/numerics.py): a bf16 run's
    reference kept Wan's float32 modules while the engine casts them, so mu-KL was not 0 at an
    unchanged policy."""
    transformer = copy.deepcopy(world_model.transformer)
    cast_like_engine(transformer, cfg.dtype)
    twin = FlowWorldModel(world_model.backend, transformer, None, None,
                          cond_frame_sigma=world_model.cond_frame_sigma,
                          num_train_timesteps=world_model.num_train_timesteps,
                          default_num_frames=world_model.default_num_frames)
    ref = PolicyStep(twin)
    ref.eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def rng_state() -> dict[str, Any]:
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _all_rng_states() -> list[dict[str, Any]]:
    mine = rng_state()
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return [mine]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, mine)
    return out


def save(engine: Any, ckpt_dir: Path, iteration: int, data_position: int, *, local_rank: int,
         skipped: int = 0) -> None:
    """Checkpoint after ``iteration`` iterations (call on every rank); returns once every rank has written its
    files. ``skipped``: the iterations in a row without an update up to ``iteration``. An unfinished folder of
    that tag goes first (:func:`clear_unfinished`). ``latest`` is not moved: :func:`mark_latest` does that."""
    tag = iteration_tag(iteration)
    clear_unfinished(ckpt_dir, tag, local_rank)
    client = {"iteration": iteration, "data_position": data_position, "skipped_iterations": skipped,
              "rng": _all_rng_states(), "lr_schedule": schedule_state(engine)}  # the decay's piece (lr_schedule.py)
    engine.save_checkpoint(str(ckpt_dir), tag=tag, client_state=client, save_latest=False)
    if dist.is_initialized():
        dist.barrier()


def clear_unfinished(ckpt_dir: Path, tag: str, local_rank: int) -> list[str]:
    """Before checkpoint ``tag`` is saved (collective: call on every rank): each node's local rank 0 deletes
    an existing ``tag`` folder, and its universal conversion, and every rank waits for that; returns what this
    process deleted. Such a folder is an earlier attempt's: a save killed part-way (or killed before
    ``latest`` moved), after which the run resumed from the checkpoint before it. DeepSpeed writes into the
    folder without clearing it, so the earlier attempt's shards stayed beside the new ones (a resume on
    another number of ranks left two ranks' sets: the export found two ``*_optim_states.pt`` files, resume
    counted the wrong number of ranks), and a conversion of the earlier attempt's state stayed beside it.

    The folder ``latest`` names is never deleted: that is the checkpoint a resume loads. A run saves only
    iterations after the one it resumed from, so this cannot happen unless ``latest`` was edited; rank 0's
    ``latest`` then stops every rank with a RuntimeError before anything is touched, and a node whose own
    (node-local) ``latest`` names it keeps it."""
    import shutil

    from training.collectives import as_rank0_sees

    if as_rank0_sees(lambda: latest_tag(ckpt_dir)) == tag:
        raise RuntimeError(f"refusing to save checkpoint {tag} over the one {ckpt_dir / 'latest'} names (what "
                           "--resume loads); a run saves only iterations after the one it resumed from, so "
                           "'latest' was changed by hand: point it at the checkpoint to continue from")
    removed = []
    if local_rank == 0 and latest_tag(ckpt_dir) != tag:
        for name in (tag, tag + UNIVERSAL_SUFFIX):  # on shared storage another node deletes it at the same time
            if (ckpt_dir / name).exists():
                shutil.rmtree(ckpt_dir / name, ignore_errors=True)
                removed.append(name)
    if dist.is_initialized():
        dist.barrier()  # no rank writes its files before the folder is gone on every node
    return removed


def mark_latest(ckpt_dir: Path, iteration: int) -> None:
    """Point ``latest`` at ``iteration``'s checkpoint, atomically (a temp file renamed over it): call on each
    node's local rank 0 after :func:`save`. The temp name is unique per host and process: on a shared
    filesystem every node writes the same ``latest`` at the same moment, and with one shared temp name the
    first node's rename took the file away from under the second (FileNotFoundError)."""
    tmp = ckpt_dir / f".latest.{socket.gethostname()}.{os.getpid()}.tmp"
    tmp.write_text(iteration_tag(iteration))
    tmp.replace(ckpt_dir / "latest")


def iteration_tag(iteration: int) -> str:
    """The checkpoint folder of ``iteration`` (``iter_000010``)."""
    return f"iter_{iteration:06d}"


def tag_iteration(tag: str) -> int:
    """The iteration of checkpoint folder ``tag`` (``iter_000010`` or its universal conversion
    ``iter_000010_universal``: 10); ValueError naming the tag for another name."""
    digits = tag.removesuffix(UNIVERSAL_SUFFIX).removeprefix("iter_")
    if not tag.startswith("iter_") or not digits.isdigit():
        raise ValueError(f"{tag!r} is not a checkpoint folder name (iter_NNNNNN, or iter_NNNNNN{UNIVERSAL_SUFFIX})")
    return int(digits)


def latest_tag(ckpt_dir: Path) -> str | None:
    """The checkpoint tag DeepSpeed's ``latest`` file names (what a resume loads); None without one."""
    return read_latest(ckpt_dir)


def plain_tag(tag: str) -> bool:
    """Whether ``tag`` can name a folder in the checkpoint directory: not empty (a ``latest`` whose write was
    killed), not ``.`` / ``..``, no path separator (else the checkpoint directory itself or a folder outside it)."""
    return bool(tag) and tag not in (".", "..") and "/" not in tag and "\\" not in tag


def checkpoint_ranks(folder: Path) -> int:
    """How many ranks wrote the ZeRO checkpoint in ``folder``: ZeRO keeps each rank's share of the optimizer
    state in its own ``zero_pp_rank_R_..._optim_states.pt`` (``bf16_zero_pp_...`` with ZeRO-1 + bf16); 0 when
    there is none."""
    return len(list(folder.glob("*zero_pp_rank_*_optim_states.pt")))


def load(engine: Any, ckpt_dir: Path, tag: str, *, learning_rate: float, weight_decay: float,
         max_iterations: int) -> tuple[int, int, int]:
    """Restore checkpoint ``tag`` (training.resume.resume_source picks it; a universal one needs an engine
    built with ``deepspeed_config(..., load_universal=True)``); returns (iteration, data_position, the
    iterations in a row without an update up to it; 0 for a checkpoint from before that was saved). RNG states
    restored too: each rank its own, or rank 0's where the checkpoint had fewer ranks. The optimizer
    state comes back with the learning rate and weight decay it was saved with; the launch's values
    replace them (:func:`apply_optimizer_settings`; ``max_iterations``: whether this launch trains any iteration,
    for its refusal of a rate of 0)."""
    # the warmup position is the restored step count (a checkpoint from a run without warmup has no state)
    path, client = engine.load_checkpoint(str(ckpt_dir), tag=tag, load_lr_scheduler_states=False)
    if path is None or client is None:
        raise ConfigError(f"--resume: DeepSpeed could not load {ckpt_dir / tag}: no readable mp_rank_00_model_"
                          "states.pt; point 'latest' at a complete checkpoint, or start without --resume")
    counts = client_counts(client, ckpt_dir / tag)
    rank = dist.get_rank() if dist.is_initialized() else 0
    states = client["rng"]
    set_rng_state(states[rank] if rank < len(states) else states[0])
    note = apply_optimizer_settings(engine, learning_rate, weight_decay, client.get("lr_schedule"),
                                    trains=counts[0] < max_iterations)
    if note is not None and rank == 0:  # a resume with another max_iterations (training/lr_schedule.py)
        print(f"note: {note}", file=sys.stderr, flush=True)
    return counts


def client_counts(client: dict[str, Any], folder: Path) -> tuple[int, int, int]:
    """(iteration, data_position, skipped iterations) of a checkpoint's client state (what `save` writes);
    ConfigError naming ``folder`` and the entries missing or not counts (a checkpoint saved by something
    else, or edited), before anything of it is applied: a KeyError traceback, every rank, before."""
    def count(key: str, default: int | None = None) -> int | None:
        value = client.get(key, default)
        if isinstance(value, int | np.integer) and not isinstance(value, bool) and value >= 0:
            return int(value)
        return None

    bad = [f"{k!r}" for k in ("iteration", "data_position") if count(k) is None]
    bad += [] if count("skipped_iterations", 0) is not None else ["'skipped_iterations'"]
    bad += [] if isinstance(client.get("rng"), list) and client["rng"] else ["'rng'"]
    if bad:
        raise ConfigError(f"--resume: {folder}: its client state (mp_rank_00_model_states.pt) has no usable "
                          f"{', '.join(bad)} (a training.engine.save checkpoint records its iteration, data "
                          "position and RNG states); point 'latest' at a checkpoint this trainer saved")
    counts = count("iteration"), count("data_position"), count("skipped_iterations", 0)
    return counts  # type: ignore[return-value]


def stale_checkpoints(tags: list[str], latest: str | None, keep: int, best: str | None = None,
                      unfinished: Sequence[str] = ()) -> list[str]:
    """The checkpoint tags (``iter_NNNNNN``; other names are ignored) to delete so that the newest ``keep``
    remain, oldest first; ``latest`` (what a resume loads) and ``best`` (the best held-out one,
    training.best) are never among them, and the ``unfinished`` ones neither count nor are deleted."""
    if keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep}")
    ours = sorted((t for t in tags if t.startswith("iter_") and t[5:].isdigit() and t not in unfinished),
                  key=lambda t: int(t[5:]))
    return [t for t in ours[:-keep] if t not in (latest, best)]


def past_latest(tags: Sequence[str], latest: str | None) -> list[str]:
    """The ``iter_NNNNNN`` tags numbered above ``latest``: at a prune ``latest`` is the save just made, so these
    are an abandoned attempt's (a resume from an earlier checkpoint); pure."""
    if latest is None or not latest.startswith("iter_") or not latest[5:].isdigit():
        return []
    return [t for t in tags if t.startswith("iter_") and t[5:].isdigit() and int(t[5:]) > int(latest[5:])]


def prune(ckpt_dir: Path, keep: int, local_rank: int, best: str | None = None) -> list[str]:
    """After a save on every rank (the caller makes sure: training/checkpointing.py agrees on the markers first):
    delete the stale checkpoints (see :func:`stale_checkpoints`; ``best`` stays); returns what this process
    deleted. Checkpoints numbered above ``latest`` (`past_latest`: left by an attempt the run went back from)
    neither count nor are deleted, as unfinished saves: they counted as the newest, so the checkpoint the run
    resumed from and each new one but the last were deleted; a save of such a tag replaces it
    (:func:`clear_unfinished`)."""
    import shutil

    if local_rank != 0 or not ckpt_dir.is_dir():
        return []
    from training.run_dir import unfinished_checkpoints

    latest = latest_tag(ckpt_dir)
    tags = [p.name for p in ckpt_dir.iterdir() if p.is_dir()]
    stale = stale_checkpoints(tags, latest, keep, best, [*unfinished_checkpoints(ckpt_dir, latest),
                                                          *past_latest(tags, latest)])
    for tag in stale:  # with its universal conversion, if any; another node may delete them at the same time
        shutil.rmtree(ckpt_dir / tag, ignore_errors=True)
        shutil.rmtree(ckpt_dir / (tag + UNIVERSAL_SUFFIX), ignore_errors=True)
    return stale
