"""GRPO objective pieces for DynDiff-GRPO (DESIGN.md §6, paper Sec. 4.2).

Small pure functions, each tested against hand-computed values in tests/test_grpo.py:

* :func:`group_advantages` -- group-relative advantages over *eligible* rewards only.
* :func:`clipped_policy_loss` -- the clipped importance-ratio surrogate.
* :func:`mean_kl` -- the mean-space KL-style regulariser (mu-KL).
* :func:`valid_per_optimizer_step` and :func:`sample_sum_scale` -- how much each micro-batch's loss
  weighs, so that every valid sample of an optimizer step counts the same.

Decisions where the issue was silent:

* A reward is eligible when it is a finite float; ``None`` (the agent's ineligible result), NaN and
  +/-inf are all ineligible and counted separately in the stats.
* A group whose eligible rewards all agree has standard deviation 0, so every advantage in it is 0;
  it is still a valid group (it gives no policy-gradient signal but its samples still carry the
  mu-KL term). It is counted in ``AdvantageStats.zero_std_groups``. "Agree" allows float rounding:
  a spread ``s_r <= ZERO_SPREAD * max(1, |r_bar|)`` is zero (a sum reward's 0.1 + 0.2 against 0.3
  differs by 5.6e-17, which ``(r - r_bar) / (s_r + eps)`` with a tiny eps turned into full-size
  advantages). The config also requires ``adv_eps > 0`` (training/config.py) for spreads just above it.
* ``approx_kl`` is the non-negative "k3" estimator ``mean((rho - 1) - log rho)`` of KL(old || new).
* The log-ratio ``log_prob - old_log_prob`` is taken in float64: a latent's summed log-prob is
  millions of nats, where float32 cannot resolve a ratio near 1. The loss comes back float64.
* The log-ratio's *value* is clamped to ``[-max_log_ratio, max_log_ratio]`` (a TrainConfig setting, default
  20) before ``exp`` so a summed-over-latents log-prob cannot overflow into ``inf * 0 = NaN``; within the
  bound the objective is exactly the paper's. Outside it the gradient passes straight through the clamp
  (``d rho = rho_clamped * d log_ratio``): a plain ``clamp`` has zero slope there, which dropped the gradient
  exactly where the pessimistic min keeps the unclipped branch on purpose (A < 0 with rho far above 1 + delta:
  the sample the update made much likelier must be pushed back); the clamp now bounds that gradient's size,
  not its existence.
* The objective is a mean over the valid (sample, SDE step) items of an optimizer step, on all ranks
  together. A micro-batch therefore contributes the *sum* of its valid items' losses times
  ``sample_sum_scale``, not their mean: with a mean, a sample whose micro-batch neighbours were
  ineligible, a sample in a short last micro-batch (``micro_batch`` not dividing G) or on a rank
  with fewer valid samples weighed more than the others, so ``micro_batch``, a memory setting,
  changed the gradient. Ineligible samples no longer shrink the step either: the mean is over the
  valid items only, as the advantages are.
* ``mean_kl`` averages over latent elements (DESIGN.md §6 writes ``mean``; the paper writes a
  squared L2 norm, which differs only by a constant factor absorbed into beta).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from policy.masks import check_binary_mask

ZERO_SPREAD = 1e-12
"""A group's reward spread at most this times max(1, |mean|) is rounding noise: zero spread."""


@dataclass(frozen=True)
class AdvantageStats:
    """Bookkeeping from :func:`group_advantages` (all counts are over the given batch)."""

    num_samples: int
    """Number of rewards given."""
    eligible_count: int
    """Rewards that were finite floats."""
    ineligible_count: int
    """Rewards that were None, NaN or inf (``none_count + nan_count + inf_count``)."""
    none_count: int
    """Rewards that were None (the agent's ineligible result)."""
    nan_count: int
    """Rewards that were NaN."""
    inf_count: int
    """Rewards that were +inf or -inf."""
    num_groups: int
    """Distinct group ids."""
    skipped_groups: int
    """Groups with fewer than 2 eligible rewards (no update from them)."""
    zero_std_groups: int
    """Valid groups whose eligible rewards were all equal (advantages all 0)."""
    valid_count: int
    """Samples that receive an update (eligible and in a non-skipped group)."""
    adv_mean: float
    """Mean advantage over valid samples (0.0 when there are none)."""
    adv_std: float
    """Population std of the advantages over valid samples (0.0 when there are none)."""
    adv_abs_max: float
    """Largest |advantage| over valid samples (0.0 when there are none)."""
    adv_clipped_fraction: float
    """Fraction of valid samples whose advantage was clipped at +/-a_max."""
    clipped_count: int
    """Valid samples whose advantage was clipped at +/-a_max (logged over all ranks: ``adv_clipped_fraction``)."""

    @property
    def eligible_fraction(self) -> float:
        """Eligible rewards / all rewards (0.0 for an empty batch)."""
        return self.eligible_count / self.num_samples if self.num_samples else 0.0

    def as_dict(self) -> dict[str, float | int]:
        out: dict[str, float | int] = asdict(self)
        out["eligible_fraction"] = self.eligible_fraction
        return out


def _classify(reward: float | None) -> str:
    if reward is None:
        return "none"
    value = float(reward)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf"
    return "ok"


def group_advantages(
    rewards: Sequence[float | None],
    group_ids: Sequence[Hashable],
    a_max: float,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor, AdvantageStats]:
    """Group-relative advantages over eligible rewards (paper Sec. 4.2, DESIGN.md §6).

    For each group with eligible index set I (n = |I|)::

        r_bar = (1/n) sum_{j in I} r_j
        s_r   = sqrt((1/n) sum_{j in I} (r_j - r_bar)^2)          (population std)
        A_i   = 0                                                  if s_r <= ZERO_SPREAD * max(1, |r_bar|)
        A_i   = clip((r_i - r_bar) / (s_r + eps), -A_max, A_max)     otherwise

    A zero-spread group (rewards equal up to float rounding) stays valid with A = 0 (``zero_std_groups``).
    Ineligible rewards (None / NaN / inf) are excluded from r_bar and s_r and get A = 0 and
    ``valid = False``. A group with n < 2 gives no update: all its samples are invalid.

    Returns ``(advantages float32 [N], valid bool [N], stats)``.
    """
    if len(rewards) != len(group_ids):
        raise ValueError(f"group_advantages: {len(rewards)} rewards but {len(group_ids)} group ids")
    if not a_max > 0:
        raise ValueError(f"group_advantages: a_max must be > 0, got {a_max}")
    if not eps >= 0:
        raise ValueError(f"group_advantages: eps must be >= 0, got {eps}")
    kinds = [_classify(r) for r in rewards]
    n = len(rewards)
    adv = torch.zeros(n, dtype=torch.float64)
    valid = torch.zeros(n, dtype=torch.bool)
    members: dict[Hashable, list[int]] = {}
    for i, g in enumerate(group_ids):
        members.setdefault(g, []).append(i)
    skipped = zero_std = clipped = 0
    for idx in members.values():
        elig = [i for i in idx if kinds[i] == "ok"]
        if len(elig) < 2:
            skipped += 1
            continue
        r = torch.tensor([float(rewards[i]) for i in elig], dtype=torch.float64)  # type: ignore[arg-type]
        mean = r.mean()
        std = ((r - mean) ** 2).mean().sqrt()
        if float(std) <= ZERO_SPREAD * max(1.0, abs(float(mean))):  # equal up to rounding: no signal
            zero_std += 1
            for i in elig:
                valid[i] = True
            continue
        raw = (r - mean) / (std + eps)
        clipped += int((raw.abs() > a_max).sum())
        a = raw.clamp(-a_max, a_max)
        for k, i in enumerate(elig):
            adv[i] = a[k]
            valid[i] = True
    vals = adv[valid]
    n_valid = int(valid.sum())
    stats = AdvantageStats(
        num_samples=n,
        eligible_count=kinds.count("ok"),
        ineligible_count=n - kinds.count("ok"),
        none_count=kinds.count("none"),
        nan_count=kinds.count("nan"),
        inf_count=kinds.count("inf"),
        num_groups=len(members),
        skipped_groups=skipped,
        zero_std_groups=zero_std,
        valid_count=n_valid,
        adv_mean=float(vals.mean()) if n_valid else 0.0,
        adv_std=float(((vals - vals.mean()) ** 2).mean().sqrt()) if n_valid else 0.0,
        adv_abs_max=float(vals.abs().max()) if n_valid else 0.0,
        adv_clipped_fraction=clipped / n_valid if n_valid else 0.0,
        clipped_count=clipped,
    )
    return adv.to(torch.float32), valid, stats


def advantage_metric_parts(adv: torch.Tensor, valid: torch.Tensor, stats: AdvantageStats) -> dict[str, Any]:
    """One rank's advantage entries of the metrics part that ``training.metrics.summarize`` combines over
    ranks (from :func:`group_advantages`' result): the updated samples' advantages and the group counts."""
    return {"advantages": adv[valid].tolist(), "adv_clipped": stats.clipped_count,
            "skipped_groups": stats.skipped_groups, "zero_std_groups": stats.zero_std_groups}


def clipped_policy_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    clip_range: float,
    *,
    max_log_ratio: float = 20.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Clipped GRPO surrogate (paper Sec. 4.2)::

        rho = exp(log pi_theta(x'|x,c) - log pi_old(x'|x,c))
        L_GRPO = -mean( min(rho * A, clip(rho, 1 - delta, 1 + delta) * A) )

    ``log_prob`` / ``old_log_prob`` come from each policy's own Gaussian (own mask and std), so the
    log-scale terms are already inside them. All inputs are [M] over (sample, SDE step) items.
    The log-ratio, hence everything after it, is computed in float64 whatever the inputs' dtype
    (``policy.dyndiff.gaussian_log_prob`` returns float64 log-probs; keep them so).

    ``log rho`` is clamped to ``[-max_log_ratio, max_log_ratio]`` in value only: outside the bound the
    gradient is ``rho_clamped * A * d log_prob`` on the branch the min takes (zero on the clipped branch, as
    in the paper), never the zero slope of a plain clamp (module docstring).

    Returns ``(loss, clip_fraction, approx_kl)``; the last two are detached scalars:
    ``clip_fraction = mean(|rho - 1| > delta)`` and ``approx_kl = mean((rho - 1) - log rho)``.
    """
    if not (log_prob.shape == old_log_prob.shape == advantages.shape):
        raise ValueError(
            "clipped_policy_loss: shapes differ: log_prob "
            f"{tuple(log_prob.shape)}, old_log_prob {tuple(old_log_prob.shape)}, "
            f"advantages {tuple(advantages.shape)}"
        )
    if log_prob.numel() == 0:
        raise ValueError("clipped_policy_loss: empty batch")
    if not clip_range > 0:
        raise ValueError(f"clipped_policy_loss: clip_range must be > 0, got {clip_range}")
    if not max_log_ratio > 0:
        raise ValueError(f"clipped_policy_loss: max_log_ratio must be > 0, got {max_log_ratio}")
    # float64: summed log-probs of real latents are ~-3e6, where float32 resolves 0.25 nats
    raw = log_prob.double() - old_log_prob.detach().double()
    # value clamped, gradient straight through (module docstring); an infinite raw value would make
    # raw - raw.detach() = inf - inf = NaN, so it passes no gradient
    passthrough = torch.where(raw.isfinite(), raw - raw.detach(), torch.zeros_like(raw))
    log_ratio = raw.detach().clamp(-max_log_ratio, max_log_ratio) + passthrough
    ratio = torch.exp(log_ratio)
    adv = advantages.detach().to(ratio.dtype)
    unclipped = ratio * adv
    clipped = ratio.clamp(1.0 - clip_range, 1.0 + clip_range) * adv
    loss = -torch.minimum(unclipped, clipped).mean()
    with torch.no_grad():
        clip_fraction = ((ratio - 1.0).abs() > clip_range).to(ratio.dtype).mean()
        approx_kl = ((ratio - 1.0) - log_ratio).mean()
    return loss, clip_fraction, approx_kl


def mean_kl(
    mean: torch.Tensor,
    ref_mean: torch.Tensor,
    ref_std: torch.Tensor,
    eps: float,
    weight_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean-space KL-style regulariser (paper Sec. 4.2, DESIGN.md §6)::

        L_muKL = mean( ((mu_theta - mu_ref) / (sigma_ref + eps))^2 )

    Interpretation (the paper and DESIGN.md differ; DESIGN.md's is kept): the paper writes the squared L2
    *norm* ``||(mu - mu_ref) / (sigma_ref + eps)||_2^2``, a sum over latent elements; DESIGN.md §6 writes
    ``mean``. They differ by the constant number of generated elements per item (~5e6 for a real latent),
    which ``beta`` absorbs; the mean keeps ``beta`` independent of the clip size. The denominator is the
    reference's *standard deviation* ``sigma_ref = s_next * M_ref`` (its own mask), plus ``eps``, squared
    after the division -- not a variance ``sigma_ref^2``: the ratio is a distance in units of the
    reference's noise scale, as in the paper.

    ``weight_mask`` (broadcastable to ``mean``, e.g. [B,1,F,1,1]; 1 = generated, 0 = conditioning
    frame; any other value is refused, policy/masks.py) excludes conditioning frames: the mean is
    ``sum(w sq) / sum(w)`` with ``w`` broadcast to ``mean``'s full shape, i.e. over the generated
    elements, channels included. Gradient flows through ``mean`` only; the reference terms are constants.
    """
    if mean.shape != ref_mean.shape:
        raise ValueError(f"mean_kl: mean {tuple(mean.shape)} vs ref_mean {tuple(ref_mean.shape)}")
    if not eps > 0:
        raise ValueError(f"mean_kl: eps must be > 0, got {eps}")
    sq = ((mean - ref_mean.detach()) / (ref_std.detach() + eps)) ** 2
    if weight_mask is None:
        return sq.mean()
    check_binary_mask("weight_mask", weight_mask)  # policy/masks.py: a frame is generated or not
    w = weight_mask.to(sq.dtype).expand_as(sq)
    denom = w.sum()
    if float(denom) <= 0:
        raise ValueError("mean_kl: weight_mask selects no element")
    return torch.where(w > 0, sq * w, torch.zeros_like(sq)).sum() / denom


def valid_per_optimizer_step(valid_per_micro: Sequence[int], micro_per_step: int) -> list[int]:
    """Valid samples of each optimizer step on this rank: the micro-batches run in order and DeepSpeed
    steps the optimizer after every ``micro_per_step`` (``gradient_accumulation_steps``) of them, so
    step ``s`` holds micro-batches ``s * micro_per_step .. (s + 1) * micro_per_step - 1``.
    Sum the result over ranks (``all_reduce``) before :func:`sample_sum_scale`."""
    if micro_per_step < 1:
        raise ValueError(f"valid_per_optimizer_step: micro_per_step must be >= 1, got {micro_per_step}")
    if len(valid_per_micro) % micro_per_step:
        raise ValueError(f"valid_per_optimizer_step: {len(valid_per_micro)} micro-batches do not split into "
                         f"optimizer steps of {micro_per_step}")
    if any(v < 0 for v in valid_per_micro):
        raise ValueError(f"valid_per_optimizer_step: negative count in {list(valid_per_micro)}")
    return [int(sum(valid_per_micro[i:i + micro_per_step])) for i in range(0, len(valid_per_micro), micro_per_step)]


def sample_sum_scale(step_valid: int, grad_accum: int, world: int) -> float:
    """Factor on the *sum* of a micro-batch's per-sample losses (DESIGN.md §6: the loss is a mean over
    the step's items). DeepSpeed divides each micro-batch's loss by ``grad_accum`` and averages the
    gradients over ``world`` ranks, so with ``scale = grad_accum * world / N`` (N = valid samples of the
    optimizer step on all ranks) the step's gradient is::

        (1/world) sum_ranks (1/grad_accum) sum_micro scale * sum_{i valid} grad l_i = (1/N) sum_i grad l_i

    every valid item weighing 1/N whatever its micro-batch, rank or ineligible neighbours.
    ``step_valid == 0`` (nothing valid in the step: every loss is zero) gives 0.0."""
    if grad_accum < 1 or world < 1:
        raise ValueError(f"sample_sum_scale: grad_accum and world must be >= 1, got {grad_accum}, {world}")
    if step_valid < 0:
        raise ValueError(f"sample_sum_scale: step_valid must be >= 0, got {step_valid}")
    return grad_accum * world / step_valid if step_valid else 0.0
