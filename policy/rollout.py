"""DynDiff rollouts of a :class:`~policy.world_model.FlowWorldModel` and their recomputed likelihoods.

``rollout`` integrates from sigma = 1 to 0 in ``num_steps`` steps of the shifted schedule
:func:`sigma_schedule`. Steps inside the SDE window are DynDiff hybrid steps (DESIGN.md §5):
each records what the GRPO update needs (:class:`SDEStepRecord`). Steps outside it are
deterministic flow Euler steps ``x + (s_next - s) v`` with no likelihood (MixGRPO /
Flow-GRPO-Fast). ``step_log_prob`` recomputes one recorded transition's log-prob, mean and std
under the current parameters, with the current policy's own mask (or, ``ratio_mask = "rollout"``, with
the rollout's binary part B).

Decisions where the issue was silent:

* ``sde_window = (start, end)`` is half-open: steps ``start .. end-1`` are SDE steps;
  ``0 <= start < end <= num_steps``. A window reaching the last step (``sigma_next = 0``) is
  allowed, but that step has std 0 everywhere: it samples its mean (the Euler step) and records
  nothing (``policy.steps.likelihood_steps``). Recorded, it had log-prob 0 yet entered the update, where the
  mu-KL term divides by the reference's std, there 0 (+ ``mu_kl_eps``): a ~1e12 factor that swamped
  the GRPO loss whenever ``beta > 0``, and its items diluted the loss mean.
* The mask history (``mask_history``): ``"window"`` (default, the issue's "first SDE step: D = B =
  0") resets at the window's first step; ``"trajectory"`` uses the previous denoising step's
  ``x0_hat`` whenever one exists (ODE steps included), so only step 0 has D = B = 0.
* ``prev_x0_hat`` in a record is the rollout (old) policy's ``x0_hat`` of the previous step, or
  ``None`` where D = B = 0. ``step_log_prob`` builds the current mask from the current policy's
  ``x0_hat`` minus that recorded one.
* ``ratio_mask``: ``"own"`` (default; DESIGN.md §6 and the paper) recomputes the whole mask, B included,
  from the current policy. B = 1[D > quantile] is a step function: positions near the quantile flip
  under tiny parameter changes (or a recompute that is not bit-identical, e.g. another micro-batch in
  bf16), each flip moves the log-prob by several nats, and after one optimizer step most log-ratios of
  a real latent reach the log-ratio clamp of training/grpo.py (ratios e^+-20, clipped or at full weight
  by the sign of A, whatever the data says). ``"rollout"`` reuses the rollout's B (``binary_mask``,
  stored in every record) and recomputes only the continuous D. ``step_log_prob`` also returns the
  fraction of generated positions where the current policy's B differs from the rollout's.
* ``mask_grad``: ``"detached"`` (default) treats the current mask, hence the std, as a constant
  in the backward pass (gradients reach the network through the mean only); ``"differentiable"``
  also back-propagates through the continuous part D of the mask into the std (the binary part
  B is a step function and carries no gradient). The forward values are identical.
* Conditioning frames start from, and keep, the first-frame latent (their velocity is 0).
* Latent precision: the state x (hence ``x_t``, ``x_next``, ``prev_x0_hat`` and the final latents) stays float32
  whatever the model's dtype; only the transformer's input is cast to its dtype (``policy.wan`` /
  ``policy.cosmos``), and its velocity comes back float32. The step's mean, std and sample are float32 and the
  log-prob sums in float64 (``gaussian_log_prob``), so ``step_log_prob`` at unchanged parameters reproduces the
  recorded log-prob exactly, for any micro-batch split (tests/test_rollout_precision.py, in a bf16 engine's
  numerics), as far as the transformer's velocity itself is the same for any batch size: its matmul kernels
  may round differently by batch size (float32 on CPU: ratios ~1e-5 nats off 1 between micro-batch 1 and a
  rollout batch of 4). States stored in bf16 would halve their memory but the recorded ``x_next`` would no longer be the
  sampled one: its rounding (~0.4% of the value) is not small next to a step's std (``sigma_next * M``), and
  summed over a latent's millions of elements the ratio at unchanged parameters drifts far from 1.
* Classifier-free guidance is off by default (``guidance_scale = 1``: one network pass per step). With
  w != 1 every velocity, in the rollout and in ``step_log_prob``, is the guided one, so the policy
  whose likelihood the update uses is the one that sampled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import Tensor

from policy.conditioning import Conditioning
from policy.dyndiff import (
    dynamic_mask,
    gaussian_log_prob,
    hybrid_step,
    predict_x0,
    transition_mean_std,
)
from policy.dyndiff_mask import check_tau_r_base, dynamic_mask_parts
from policy.schedule_shift import DEFAULT_SHIFT
from policy.steps import likelihood_steps
from policy.world_model import FlowWorldModel, check_guidance_scale


class RolloutConfigError(ValueError):
    """An invalid rollout setting."""


@dataclass
class RolloutConfig:
    """Sampler settings shared by the rollout and the likelihood recomputation."""

    num_steps: int = 10
    """Number K of denoising steps from sigma = 1 to sigma = 0."""
    sde_window: tuple[int, int] = (0, 4)
    """Half-open range [start, end) of step indices that are stochastic DynDiff steps."""
    tau: float = 0.8
    """Quantile level in (0, 1) of the binary dynamic-region mask B."""
    r_base: float = 0.3
    """Minimum exploration ratio in (0, 1] of the mask M (static regions keep sigma_next * r_base)."""
    shift: float = DEFAULT_SHIFT
    """Timestep shift of the schedule (sigma = shift t / (1 + (shift - 1) t)); 1 = uniform. A run passes its
    resolved one: the checkpoint scheduler's unless set (`policy.schedule_shift`, training/sampler_shift.py)."""
    log_prob_reduce: Literal["sum", "mean"] = "sum"
    """Sum (paper) or mean over latent elements of the per-element log density."""
    mask_grad: Literal["detached", "differentiable"] = "detached"
    """Whether step_log_prob back-propagates through the continuous part of the current mask."""
    ratio_mask: Literal["own", "rollout"] = "own"
    """Binary part B of the mask step_log_prob uses: the current policy's own ("own") or the rollout's."""
    mask_history: Literal["window", "trajectory"] = "window"
    """Where D = B = 0: at the SDE window's first step ("window") or only at step 0 ("trajectory")."""
    guidance_scale: float = 1.0
    """Classifier-free guidance weight w of every velocity (rollout and likelihood): 1 = off; otherwise
    the conditioning needs negative text embeddings and each step costs a doubled-batch pass."""

    def __post_init__(self) -> None:
        self.sde_window = (int(self.sde_window[0]), int(self.sde_window[1]))
        if self.num_steps < 1:
            raise RolloutConfigError(f"num_steps must be >= 1, got {self.num_steps}")
        start, end = self.sde_window
        if not 0 <= start < end <= self.num_steps:
            raise RolloutConfigError(
                f"sde_window {self.sde_window} must satisfy 0 <= start < end <= num_steps ({self.num_steps})")
        try:
            check_tau_r_base(self.tau, self.r_base)
        except ValueError as exc:
            raise RolloutConfigError(str(exc)) from exc
        if not self.shift > 0:
            raise RolloutConfigError(f"shift must be > 0, got {self.shift}")
        try:
            check_guidance_scale(self.guidance_scale)
        except ValueError as exc:
            raise RolloutConfigError(str(exc)) from exc
        for name, value, allowed in (
            ("log_prob_reduce", self.log_prob_reduce, ("sum", "mean")),
            ("mask_grad", self.mask_grad, ("detached", "differentiable")),
            ("mask_history", self.mask_history, ("window", "trajectory")),
            ("ratio_mask", self.ratio_mask, ("own", "rollout")),
        ):
            if value not in allowed:
                raise RolloutConfigError(f"{name} must be one of {allowed}, got {value!r}")


@dataclass
class SDEStepRecord:
    """One recorded stochastic transition x_t -> x_next (tensors batch-first)."""

    step: int
    """Index k of the denoising step."""
    x_t: Tensor
    """[B, C, F, H, W] float32 state before the step (float32 whatever the model's dtype: module docstring)."""
    x_next: Tensor
    """[B, C, F, H, W] float32 sampled state after the step."""
    sigma: Tensor
    """[B] noise level at x_t."""
    sigma_next: Tensor
    """[B] noise level at x_next."""
    prev_x0_hat: Tensor | None
    """[B, C, F, H, W] old policy's x0_hat at the previous step, None where D = B = 0."""
    log_prob: Tensor
    """[B] float64 old policy's log-likelihood of x_next (conditioning frames excluded); keep it float64:
    a summed log-prob is millions of nats, where float32 cannot resolve the ratio to the new one."""
    mask_mean: Tensor
    """[B] mean of the DynDiff mask M over generated frames."""
    binary_mask: Tensor | None = None
    """[B, 1, F, H, W] bool: the binary part B of the rollout's mask; None where D = B = 0."""


@dataclass
class Rollout:
    """A finished batch of trajectories."""

    latents: Tensor
    """[B, C, F, H, W] final clean latents (conditioning frames = the first-frame latent)."""
    steps: list[SDEStepRecord]
    """One record per SDE step, in order."""
    cond: Conditioning
    """The conditioning used."""
    sigmas: Tensor = field(default_factory=lambda: torch.empty(0))
    """[K + 1] schedule used."""


def sigma_schedule(num_steps: int, shift: float) -> Tensor:
    """[K + 1] float32 noise levels from 1 to 0: ``sigma = shift t / (1 + (shift - 1) t)``, t uniform.

    The shifted-uniform schedule of Wan's flow UniPC (whose t runs from 1 towards 1/1000 instead of 0: each
    t differs by under 0.1%, and its first sigma is 1 - 1e-6); diffusers'
    FlowMatchEulerDiscreteScheduler spaces its sigmas differently (it shifts a range ending at a shifted
    sigma_min, so its second-to-last sigma is far smaller), so ``sample_ode`` at the same ``num_steps`` and
    ``shift`` is not that scheduler's output. Cosmos-Predict2.5's pipeline samples on a Karras schedule that no
    ``shift`` reproduces (`policy.cosmos`'s module docstring)."""
    if num_steps < 1 or not shift > 0:
        raise RolloutConfigError(f"need num_steps >= 1 and shift > 0, got {num_steps}, {shift}")
    t = torch.linspace(1.0, 0.0, num_steps + 1, dtype=torch.float64)
    return (shift * t / (1.0 + (shift - 1.0) * t)).float()


def _mask_mean(mask: Tensor, keep: Tensor) -> Tensor:
    """[B] mean of mask [B, 1, F, H, W] over generated frames (keep [B, 1, F, 1, 1])."""
    hw = mask.shape[-2] * mask.shape[-1]
    num = (mask * keep).flatten(1).sum(1)
    den = (keep.flatten(1).sum(1) * hw).clamp(min=1)
    return num / den


def mask_flip_fraction(own: Tensor, recorded: Tensor, keep: Tensor) -> Tensor:
    """[B] fraction of generated positions (``keep`` [B, 1, F, 1, 1] = 1) where two binary masks
    [B, 1, F, H, W] differ: ``sum(keep (own != recorded)) / (H W sum(keep))`` (0 with no generated frame)."""
    differ = (own != recorded.to(own.device)).float() * keep
    return differ.flatten(1).sum(1) / (keep.flatten(1).sum(1) * own.shape[-2] * own.shape[-1]).clamp(min=1)


def _needs_reset(config: RolloutConfig, k: int, prev_x0: Tensor | None) -> bool:
    return prev_x0 is None or (config.mask_history == "window" and k == config.sde_window[0])


@torch.no_grad()
def rollout(
    model: FlowWorldModel,
    cond: Conditioning,
    config: RolloutConfig,
    *,
    generator: torch.Generator | None = None,
    noise: Tensor | None = None,
) -> Rollout:
    """Sample B trajectories (no grad; put the model in eval mode first)."""
    x, keep = _initial_state(cond, generator, noise)
    b, device = x.shape[0], x.device
    sigmas = sigma_schedule(config.num_steps, config.shift).to(device)
    start, end = config.sde_window
    recorded = likelihood_steps(config.num_steps, config.sde_window)
    prev_x0: Tensor | None = None
    records: list[SDEStepRecord] = []
    for k in range(config.num_steps):
        s, s_next = sigmas[k].expand(b), sigmas[k + 1].expand(b)
        v = model.velocity(x, s, cond, config.guidance_scale)
        x0 = predict_x0(x, v, s)
        if start <= k < end:
            prev = None if _needs_reset(config, k, prev_x0) else prev_x0
            binary = None
            if prev is None:
                mask = dynamic_mask(None, config.tau, config.r_base, shape=tuple(x.shape), device=device)
            else:
                mask, binary = dynamic_mask_parts(x0 - prev, config.tau, config.r_base, overwrite=True)
            st = hybrid_step(x, v, s, s_next, mask, generator=generator, cond_mask=keep)
            if k in recorded:
                lp = gaussian_log_prob(st.sample, st.mean, st.std, config.log_prob_reduce, weight_mask=keep)
                records.append(SDEStepRecord(step=k, x_t=x, x_next=st.sample, sigma=s.clone(),
                                             sigma_next=s_next.clone(), prev_x0_hat=prev, log_prob=lp,
                                             mask_mean=_mask_mean(mask, keep), binary_mask=binary))
            x = st.sample
        else:
            x = x + (s_next - s).view(b, 1, 1, 1, 1) * v
        prev_x0 = x0
    return Rollout(latents=x, steps=records, cond=cond, sigmas=sigmas)


def cat_rollouts(parts: Sequence[Rollout], cond: Conditioning) -> Rollout:
    """The rollouts of consecutive chunks of one batch as one :class:`Rollout` of the whole batch ``cond``
    (a group sampled a few samples at a time; ``step_log_prob`` then recomputes any slice of it)."""
    if not parts:
        raise ValueError("cat_rollouts: no rollouts")
    if len({len(p.steps) for p in parts}) != 1:
        raise ValueError(f"cat_rollouts: the parts recorded {[len(p.steps) for p in parts]} SDE steps")
    steps = []
    for records in zip(*(p.steps for p in parts), strict=True):
        first = records[0]
        if any(r.step != first.step or (r.prev_x0_hat is None) != (first.prev_x0_hat is None)
               or (r.binary_mask is None) != (first.binary_mask is None) for r in records):
            raise ValueError(f"cat_rollouts: the parts' records of step {first.step} differ in kind")
        steps.append(SDEStepRecord(
            step=first.step, x_t=torch.cat([r.x_t for r in records]), x_next=torch.cat([r.x_next for r in records]),
            sigma=torch.cat([r.sigma for r in records]), sigma_next=torch.cat([r.sigma_next for r in records]),
            prev_x0_hat=None if first.prev_x0_hat is None else torch.cat([r.prev_x0_hat for r in records]),  # type: ignore[misc]
            log_prob=torch.cat([r.log_prob for r in records]), mask_mean=torch.cat([r.mask_mean for r in records]),
            binary_mask=None if first.binary_mask is None else torch.cat([r.binary_mask for r in records])))  # type: ignore[misc]
    latents = torch.cat([p.latents for p in parts])
    if latents.shape[0] != cond.first_frame_latent.shape[0]:
        raise ValueError(f"cat_rollouts: {latents.shape[0]} samples for a conditioning batch of "
                         f"{cond.first_frame_latent.shape[0]}")
    return Rollout(latents=latents, steps=steps, cond=cond, sigmas=parts[0].sigmas)


def sample_ode(
    model: FlowWorldModel,
    cond: Conditioning,
    num_steps: int,
    shift: float,
    *,
    generator: torch.Generator | None = None,
    noise: Tensor | None = None,
    guidance_scale: float = 1.0,
) -> Tensor:
    """Final latents [B, C, F, H, W] of the deterministic sampler: ``num_steps`` flow Euler steps
    ``x <- x + (s_next - s) v`` over :func:`sigma_schedule` (the ODE steps of :func:`rollout`, with no
    SDE window), from the same initial state. Same noise, same model -> the same latents; this is how a
    trained policy is evaluated (training/generate.py). No grad; put the model in eval mode first."""
    x, _ = _initial_state(cond, generator, noise)
    b = x.shape[0]
    sigmas = sigma_schedule(num_steps, shift).to(x.device)
    for k in range(num_steps):
        s, s_next = sigmas[k].expand(b), sigmas[k + 1].expand(b)
        x = x + (s_next - s).view(b, 1, 1, 1, 1) * model.velocity(x, s, cond, guidance_scale)
    return x


def initial_noise(cond: Conditioning, generator: torch.Generator | None) -> Tensor:
    """The standard-normal latents [B, C, F, H, W] a rollout or `sample_ode` starts from when given
    `generator` and no noise (drawn on the generator's device, moved to the conditioning's)."""
    ff = cond.first_frame_latent
    b, c, _, h, w = ff.shape
    gdev = generator.device if generator is not None else ff.device
    return torch.randn((b, c, cond.num_latent_frames, h, w), generator=generator, device=gdev).to(ff.device)


def _initial_state(cond: Conditioning, generator: torch.Generator | None,
                   noise: Tensor | None) -> tuple[Tensor, Tensor]:
    """(x at sigma = 1: noise on generated frames, the first-frame latent on conditioning frames;
    the conditioning keep-mask as float [B, 1, F, 1, 1])."""
    ff = cond.first_frame_latent
    b, c, _, h, w = ff.shape
    f = cond.num_latent_frames
    device = ff.device
    if noise is None:
        noise = initial_noise(cond, generator)
    elif noise.shape != (b, c, f, h, w):
        raise ValueError(f"noise must be {(b, c, f, h, w)}, got {tuple(noise.shape)}")
    keep = cond.cond_mask.to(device=device, dtype=torch.float32)
    return keep * noise.float() + (1.0 - keep) * ff.float(), keep


def step_log_prob(
    model: FlowWorldModel,
    cond: Conditioning,
    record: SDEStepRecord,
    config: RolloutConfig,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Log-prob [B] (float64), mean and std ([B, C, F, H, W]) of ``record``'s transition under the current
    parameters, and the [B] fraction of generated positions where the current policy's binary mask B
    differs from the rollout's (``mask_flip_fraction``; 0 where D = B = 0).

    Runs with autograd (call it in train mode for the update, under no_grad for a reference).
    The mask's continuous part D comes from the current policy's ``x0_hat`` at ``record.x_t`` minus
    ``record.prev_x0_hat`` (``r_base`` everywhere when that is None); its binary part B is the current
    policy's own (``config.ratio_mask = "own"``) or ``record.binary_mask`` (``"rollout"``).

    Interpretation (the paper and DESIGN.md §6 say only that each policy uses its own mask, not which
    ``x0_hat(k-1)`` enters the current policy's ``Delta x0_hat``): ``prev_x0_hat`` is the *rollout (old)
    policy's* prediction at the previous step, recorded like ``x_t``. The mask depends on the trajectory's
    history, not on ``x_t`` alone, so the ratio compares both policies' densities of ``x_next`` given the
    same recorded history ``(x_t, prev_x0_hat)``; only the current step's ``x0_hat`` is the current
    policy's. The other reading (the current policy's ``x0_hat`` at the previous state) needs a second
    forward per item, and a state the rollout does not record when the previous step was an ODE step
    (``mask_history = "trajectory"``). The two agree while the parameters are the rollout's (the first
    optimizer step of an iteration).
    """
    x_t = record.x_t
    v = model.velocity(x_t, record.sigma, cond, config.guidance_scale)
    keep = cond.cond_mask.to(device=x_t.device, dtype=torch.float32)
    flips = torch.zeros(x_t.shape[0], device=x_t.device)
    if record.prev_x0_hat is None:
        mask = dynamic_mask(None, config.tau, config.r_base, shape=tuple(x_t.shape), device=x_t.device)
    else:
        if record.binary_mask is None and config.ratio_mask == "rollout":
            raise ValueError(f"ratio_mask 'rollout': the record of step {record.step} has no binary_mask")
        delta = predict_x0(x_t, v, record.sigma) - record.prev_x0_hat
        if config.mask_grad == "detached":
            delta = delta.detach()
        reuse = record.binary_mask if config.ratio_mask == "rollout" else None
        mask, own = dynamic_mask_parts(delta, config.tau, config.r_base, binary=reuse)
        if record.binary_mask is not None:
            flips = mask_flip_fraction(own, record.binary_mask, keep)
    mean, std = transition_mean_std(x_t, v, record.sigma, record.sigma_next, mask, cond_mask=keep)
    log_prob = gaussian_log_prob(record.x_next, mean, std, config.log_prob_reduce, weight_mask=keep)
    return log_prob, mean, std, flips
