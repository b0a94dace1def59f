"""Step 4 of a DynDiff-GRPO iteration: the policy update over the iteration's rollouts (DESIGN.md §6).

`update_policy` runs ``inner_epochs`` passes over (group, SDE step, micro-batch of samples) items in an
order seeded by (seed, iteration, epoch). Each item recomputes the current policy's log-prob / mean /
std with gradients (``engine(...)`` -> ``step_log_prob``, train mode) and, when ``beta > 0``, the
reference's mean / std (LoRA adapters disabled, or the frozen copy), then
``loss = clipped GRPO + beta * mu-KL``; ``engine.backward(loss)``; ``engine.step()``. DeepSpeed
accumulates ``gradient_accumulation_steps`` micro-batches per optimizer step.

Weighting: the loss of an optimizer step is the mean over its valid (sample, SDE step) items on all
ranks. A micro-batch contributes the sum of its valid samples' terms times
``training.grpo.sample_sum_scale`` (which undoes DeepSpeed's averaging over accumulation steps and
ranks), so ``micro_batch`` is only a memory setting and a sample never weighs more because its
neighbours were ineligible. Every rank runs the same number of micro-batches so ZeRO's collectives stay
in step: a micro-batch without a valid sample contributes a zero loss, and the reference pass runs on
every rank whether or not its samples are valid (under ZeRO-3 each forward gathers parameters
collectively). When no rank has a valid sample the whole phase is skipped on all ranks, and so is any
optimizer step none of whose micro-batches holds a valid sample on any rank (possible when
``optimizer_steps_per_epoch > 1`` shuffles the invalid ones together): its zero gradient would still be an
AdamW step -- weight decay and the momentum of earlier steps move the weights with no data behind them -- and
the objective, a mean over the step's items, has no items there. Every rank sees the same all-reduced counts,
so all skip the same ``grad_accum`` micro-batches, which keeps DeepSpeed's accumulation boundaries and ZeRO's
collectives in step; the step is counted in ``UpdateLog.empty_steps`` and the learning-rate schedule does not
advance for it.

Decision where the issue was silent: an invalid sample's zero weight cannot keep a non-finite forward out
of the gradients (the chain rule multiplies its zero by the NaN inside the network: ``0 * NaN = NaN``), so
invalid samples never enter the graph: a micro-batch with a valid sample runs the policy forward (and the
reference's) on its valid samples only (`forward_rows`), which also saves their forward and backward. A
micro-batch without a valid sample still runs one forward, backward and step on its first sample alone
(ZeRO's collectives), with a loss that is an exact 0 (``nan_to_num`` first: it does not depend on the
forward's values); it is counted (``UpdateLog.empty_micro_batches``). That forward runs on the sample's record
with its non-finite values set to 0 (`finite_inputs`): the collectives need an input, not that sample's
values, and a diverged rollout's NaN latents (an ineligible sample, alone in its micro-batch whenever
``micro_batch`` is 1, the default) otherwise put 0 * NaN into the step's gradient, so DeepSpeed dropped the
whole optimizer step (its gradient norm invalid) and ``nonfinite_loss: skip`` lost the iteration's update to
one diverged rollout. When that forward is still not finite (on finite inputs: the network itself is) it is
counted in ``UpdateLog.nonfinite_ignored``, which training/metrics.py adds to ``nonfinite_losses`` (the
divergence guard), so it is never unannounced.

The logged per-micro-batch values (`UpdateLog`) come with the number of valid samples behind each, so
training/metrics.py weighs them like the objective.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from policy.conditioning import Conditioning
from policy.rollout import Rollout, RolloutConfig
from policy.steps import likelihood_steps
from training.config import TrainConfig
from training.data import derive_seed
from training.grpo import clipped_policy_loss, mean_kl, sample_sum_scale, valid_per_optimizer_step
from training.sampler_shift import sampling_shift


@dataclass
class Group:
    """The G rollouts of one prompt on this rank."""

    cond: Conditioning
    """Conditioning of the prompt, repeated G times."""
    rollout: Rollout
    """The G recorded rollouts (latents and every SDE step)."""
    frames: np.ndarray
    """Decoded clips, uint8 (G, T, H, W, 3)."""
    text: str
    """The prompt's instruction."""
    advantages: torch.Tensor | None = None
    """(G,) group-relative advantages, set once the rewards are in."""
    valid: torch.Tensor | None = None
    """(G,) bool: the sample has a valid advantage (eligible reward, group not skipped)."""

    def valid_mask(self) -> torch.Tensor:
        """`valid`, which the update reads; ValueError for a group whose rewards are not in yet."""
        if self.valid is None:
            raise ValueError(f"group of {self.text!r} has no valid mask: set its advantages and valid first")
        return self.valid


@dataclass
class UpdateLog:
    """What the update phase logs: one entry per micro-batch with at least one valid sample."""

    losses: list[float] = field(default_factory=list)
    """GRPO + beta * mu-KL, mean over the micro-batch's valid samples."""
    clip_fracs: list[float] = field(default_factory=list)
    """Fraction of valid samples whose ratio was clipped."""
    approx_kls: list[float] = field(default_factory=list)
    """Approximate KL(old || new) over the valid samples."""
    mu_kls: list[float] = field(default_factory=list)
    """mu-KL to the reference (empty when beta = 0)."""
    mask_flips: list[float] = field(default_factory=list)
    """Mean over the valid samples of the fraction of generated positions where the current policy's
    binary mask B differs from the rollout's (``policy.rollout.mask_flip_fraction``), for the steps that
    have a B (a step without mask history, D = B = 0, cannot flip and is left out)."""
    mask_flip_counts: list[int] = field(default_factory=list)
    """Valid samples behind each ``mask_flips`` entry."""
    item_counts: list[int] = field(default_factory=list)
    """Valid samples behind each entry above: their weight in the logged means."""
    grad_norms: list[float] = field(default_factory=list)
    """Global gradient 2-norm of each optimizer step, before clipping (DeepSpeed's
    ``get_global_grad_norm``; the same on every rank; inf when fp16 gradients overflowed)."""
    skipped: bool = False
    """No rank had a valid sample, so no update ran."""
    empty_steps: int = 0
    """Optimizer steps without a valid sample on any rank: not taken, their micro-batches not run."""
    empty_micro_batches: int = 0
    """Micro-batches without a valid sample in a step that has some: run with an exact zero loss (collectives),
    logged nowhere else."""
    nonfinite_ignored: int = 0
    """Micro-batches without a valid sample whose one-sample forward (log-prob or mean) was NaN or inf although
    its inputs were finite (`finite_inputs`): its zero loss does not keep that NaN out of the gradients (module
    docstring)."""


def metric_parts(upd: UpdateLog) -> dict[str, Any]:
    """This rank's update entries of the local metrics dict the trainer gathers (training/metrics.py
    ``summarize`` reads them by these names). One mapping, so a new `UpdateLog` field is logged by adding it here
    rather than in the trainer's loop (``empty_steps`` was counted but written to no row)."""
    return {"clip_fraction": upd.clip_fracs, "approx_kl": upd.approx_kls, "mu_kl": upd.mu_kls, "loss": upd.losses,
            "item_counts": upd.item_counts, "grad_norms": upd.grad_norms, "mask_flip_fraction": upd.mask_flips,
            "mask_flip_counts": upd.mask_flip_counts, "update_skipped": upd.skipped,
            "nonfinite_ignored": upd.nonfinite_ignored, "empty_steps": upd.empty_steps}


MINIMUM_LOSS_SCALE = "Current loss scale already at minimum"
"""How DeepSpeed's ``DynamicLossScaler.update_scale`` words the bare Exception it raises at fp16's minimum scale."""


class LossScaleAtMinimum(RuntimeError):
    """fp16 gradients overflowed at DeepSpeed's minimum loss scale (its bare Exception, `optimizer_step`). The
    overflow is all-reduced before the scale is updated, so every rank raises it in the same optimizer step, with
    all the update's collectives run: training/rank_failures.py ``Tried`` keeps it, as one rank's failure of a
    collective-free phase, and every rank stops on RankFailed (training/train.py ``exit_status``: every rank)."""

    def __init__(self) -> None:  # the iteration, the last checkpoint and the ranks: RankFailed's message around it
        # (it said "on every rank", also inside a single-GPU run's stop, which RankFailed words without ranks)
        super().__init__(
            "fp16 gradients overflowed at DeepSpeed's minimum loss scale (the fp16 section's min_loss_scale): the "
            "policy has diverged, or its gradients do not fit in fp16. Resume from the last checkpoint with a lower "
            "learning_rate, or train in bf16 (dtype: bfloat16)")


def optimizer_step(engine: Any) -> None:
    """``engine.step()``, DeepSpeed's Exception at fp16's minimum loss scale raised as `LossScaleAtMinimum` (its
    text is the only mark it has); every other exception as it is."""
    try:
        engine.step()
    except Exception as exc:
        if type(exc) is Exception and str(exc).startswith(MINIMUM_LOSS_SCALE):
            raise LossScaleAtMinimum from exc
        raise


def chunk(c: int, micro_batch: int, group: int) -> slice:
    """Samples of micro-batch ``c`` of a group (the last one may be shorter)."""
    return slice(c * micro_batch, min((c + 1) * micro_batch, group))


def take(obj: Any, sl: slice | torch.Tensor, batch: int) -> Any:
    """A copy of a dataclass with every tensor field of leading size ``batch`` sliced to ``sl`` (a slice or
    an index tensor of rows)."""
    changes = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] == batch:
            changes[f.name] = value[sl]
    return dataclasses.replace(obj, **changes)


def finite_inputs(record: Any) -> Any:
    """A copy of a dataclass (an `SDEStepRecord`) with the NaN / inf values of its floating tensor fields set to 0:
    the input of the forward a micro-batch without a valid sample runs for the collectives alone (module
    docstring). Finite values are kept, so a finite record gives the same forward."""
    changes = {}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            changes[f.name] = torch.nan_to_num(value, nan=0.0, posinf=0.0, neginf=0.0)
    return dataclasses.replace(record, **changes)


def forward_rows(valid: torch.Tensor, sl: slice) -> tuple[slice | torch.Tensor, torch.Tensor]:
    """``(rows, keep)`` for micro-batch ``sl`` of a group, given the group's (G,) ``valid``. ``keep``: its valid
    samples, indices into the micro-batch. ``rows``: the rows of the group it runs the forward on: those
    valid samples; all of ``sl`` (a slice, no copy) when every one is valid; its first sample alone when none
    is (a forward the collectives need, as small as it gets). Both from one read of ``valid`` (one device
    sync), so the rows with a valid sample are exactly ``keep``'s. Index tensors are on the CPU: they index
    tensors on any device (a CUDA index could not index a CPU one)."""
    keep = valid[sl].nonzero().flatten().cpu()
    if len(keep) == 0:
        return slice(sl.start, sl.start + 1), keep
    if len(keep) == sl.stop - sl.start:
        return sl, keep
    return keep + sl.start, keep


def rollout_config(cfg: TrainConfig, *, num_steps: int | None = None,
                   guidance_scale: float | None = None) -> RolloutConfig:
    """The sampler settings of a run: what its rollouts and the update's likelihoods use, and what
    `training.generate`'s DynDiff sampler uses with its own ``num_steps`` / ``guidance_scale`` (None: the run's).
    RolloutConfigError for settings it refuses, and for a shift not yet resolved (`sampler_shift.resolve_shift`)."""
    shift = sampling_shift(cfg)
    start, end = cfg.sde_window  # a list when read from JSON
    return RolloutConfig(num_steps=cfg.num_steps if num_steps is None else num_steps, sde_window=(start, end),
                         tau=cfg.tau, r_base=cfg.r_base, shift=shift, log_prob_reduce=cfg.log_prob_reduce,
                         mask_grad=cfg.mask_grad, mask_history=cfg.mask_history,
                         guidance_scale=cfg.guidance_scale if guidance_scale is None else guidance_scale,
                         ratio_mask=cfg.ratio_mask)


def update_policy(engine: Any, groups: list[Group], cfg: TrainConfig, rcfg: RolloutConfig, *, reference: Any,
                  iteration: int, grad_accum: int, device: torch.device, valid_total: float | None = None) -> UpdateLog:
    """Step 4 on this rank's ``groups`` (their ``advantages`` / ``valid`` set): every epoch's micro-batches
    through the DeepSpeed ``engine`` (a `training.engine.PolicyStep`); ``reference`` is the frozen copy of a
    full fine-tune, or None (LoRA: adapters disabled; or beta = 0). ``valid_total``: the valid samples on all
    ranks, when the caller all-reduced them already (training/rank_failures.py ``agreed_count``); None: here.
    Collective: call on every rank."""
    world_model = engine.module.world_model
    group, world = cfg.group_size, dist.get_world_size()
    sde_steps = likelihood_steps(cfg.num_steps, cfg.sde_window)
    chunks = -(-group // cfg.micro_batch)
    valid = torch.cat([g.valid_mask().cpu() for g in groups]) if groups else torch.zeros(0, dtype=torch.bool)
    if valid_total is None:
        total = torch.tensor([float(valid.sum())], dtype=torch.float64, device=device)
        dist.all_reduce(total)
        valid_total = total.item()
    out = UpdateLog(skipped=valid_total == 0)
    if out.skipped:
        return out
    engine.module.train()
    items = [(gi, k, c) for gi in range(len(groups)) for k in range(len(sde_steps)) for c in range(chunks)]
    chunk_valid = {(gi, c): int(g.valid_mask()[chunk(c, cfg.micro_batch, group)].sum())
                   for gi, g in enumerate(groups) for c in range(chunks)}
    for epoch in range(cfg.inner_epochs):
        seeded = torch.Generator().manual_seed(derive_seed(cfg.seed, iteration, epoch))
        order = torch.randperm(len(items), generator=seeded).tolist()
        # valid samples of each optimizer step on all ranks: every one of them weighs the same
        step_valid = torch.tensor(valid_per_optimizer_step(
            [chunk_valid[items[n][0], items[n][2]] for n in order], grad_accum), dtype=torch.float64, device=device)
        dist.all_reduce(step_valid)
        step_counts = [int(v) for v in step_valid.tolist()]  # the same on every rank
        out.empty_steps += step_counts.count(0)
        for pos, n in enumerate(order):
            if step_counts[pos // grad_accum] == 0:  # no item in this optimizer step: no AdamW step (docstring)
                continue
            gi, k, c = items[n]
            g = groups[gi]
            sl = chunk(c, cfg.micro_batch, group)
            rows, keep = forward_rows(g.valid_mask(), sl)  # invalid samples never enter the graph (module docstring)
            cond = g.cond.select(rows)
            record = take(g.rollout.steps[k], rows, group)
            if len(keep) == 0:  # a forward for the collectives alone: on finite inputs (module docstring)
                record = finite_inputs(record)
            ref_mean = ref_std = None
            if cfg.beta > 0:  # on every rank, valid or not: ZeRO-3 forwards gather parameters collectively
                with torch.no_grad():
                    if reference is not None:
                        _, ref_mean, ref_std, _ = reference(cond, record, rcfg)
                    else:
                        with world_model.transformer.disable_adapter():
                            _, ref_mean, ref_std, _ = engine(cond, record, rcfg)
            # the rows of ``rows``: with a valid sample, exactly the valid ones (no further ``[keep]``)
            log_prob, mean, _, flips = engine(cond, record, rcfg)
            if len(keep) == 0:  # nothing valid here: an exact zero loss keeps the collectives in step
                out.empty_micro_batches += 1
                if not (bool(log_prob.isfinite().all()) and bool(mean.isfinite().all())):
                    out.nonfinite_ignored += 1  # its zero loss cannot keep NaN out of the gradients
                loss = log_prob.nan_to_num(0.0, 0.0, 0.0).sum() * 0.0 + mean.nan_to_num(0.0, 0.0, 0.0).sum() * 0.0
            else:
                # float64 (policy.dyndiff.gaussian_log_prob): the log-ratio of two ~-3e6 sums is taken in
                # float64 (clipped_policy_loss); a float32 one resolved only 0.25 nats
                pol, clip_frac, approx_kl = clipped_policy_loss(
                    log_prob.double(), record.log_prob.double(), g.advantages[sl][keep].double(), cfg.clip_range,
                    max_log_ratio=cfg.max_log_ratio)
                item_loss = pol  # mean over this micro-batch's valid samples
                if ref_mean is not None and ref_std is not None:
                    kl = mean_kl(mean, ref_mean, ref_std, cfg.mu_kl_eps, weight_mask=cond.cond_mask)
                    item_loss = item_loss + cfg.beta * kl
                    out.mu_kls.append(float(kl.detach()))
                out.clip_fracs.append(float(clip_frac))
                out.approx_kls.append(float(approx_kl))
                if record.binary_mask is not None:  # a step without B would count as 0 flips, halving the rate
                    out.mask_flips.append(float(flips.float().mean()))
                    out.mask_flip_counts.append(len(keep))
                out.losses.append(float(item_loss.detach()))
                out.item_counts.append(len(keep))
                # their sum, weighted so each valid sample of the step counts 1/N (training/grpo.py)
                loss = item_loss * (len(keep) * sample_sum_scale(step_counts[pos // grad_accum], grad_accum, world))
            boundary = engine.is_gradient_accumulation_boundary()  # this step() updates the weights
            engine.backward(loss)
            optimizer_step(engine)
            if boundary and (norm := engine.get_global_grad_norm()) is not None:
                out.grad_norms.append(float(norm))
    return out
