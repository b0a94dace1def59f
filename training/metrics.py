"""Per-iteration metrics: aggregation over ranks into the row training/metrics_log.py ``MetricsLog`` writes to
OUTPUT_DIR/metrics.jsonl, TensorBoard and W&B (rank 0).

Metric names (one JSON object per iteration in metrics.jsonl):

* ``reward_mean`` / ``reward_std`` -- over eligible rewards of all ranks (population std).
* ``eligible_fraction`` / ``ineligible_count`` (+ ``ineligible_none|nan|inf|error``) -- reward validity:
  ``none`` is the reward's verdict on the clip (the agent's ⊥, an undecodable clip included), ``error`` a broken
  reward or an outage (the agent's LLM endpoint or tools down; training/rewards.py).
* ``skipped_groups`` -- groups with fewer than 2 eligible rewards (no update from them).
* ``zero_std_groups`` -- groups whose eligible rewards all agree (advantage 0 for each: no signal, though they
  stay in the update's mean and its mu-KL term); with a gated reward, a group that scored 0 throughout.
* ``adv_mean`` / ``adv_std`` / ``adv_abs_max`` -- advantages of the samples that were updated (null without one).
* ``adv_clipped_fraction`` -- share of those samples whose advantage was clipped at +/- ``a_max`` (null without
  one); near 1, ``a_max`` flattens the group's ranking.
* ``clip_fraction`` -- share of (sample, SDE step) items whose ratio left [1 - delta, 1 + delta].
* ``approx_kl`` -- mean k3 estimate of KL(old || new) over the updated (sample, SDE step) items.
* ``mu_kl`` -- mean mu-KL regulariser (mean-space distance to the reference policy), same items.
* ``loss`` -- mean total loss over the same items (the finite ones).
* ``mask_flip_fraction`` -- share of generated positions where the update's recomputed binary mask B
  differs from the rollout's, same items except the SDE steps without a B (no mask history: D = B = 0,
  nothing to flip); null when no updated step has one (``ratio_mask: own`` puts each flip into the ratio).

The update logs one value per micro-batch (a mean over its valid samples) with ``item_counts``, the
number of those samples; the five lines above weigh each micro-batch by it, so they are means over
items, as the objective is (with uneven micro-batches a plain mean of micro-batch means would not be).
* ``mask_mean`` -- mean of the dynamic mask M over the (rollout, SDE step) items of all ranks (r_base <= M <= 1),
  the rollouts that diverged left out (training/rollout_log.py ``mask_means``).
* ``rollout_diversity`` / ``rollout_diversity_frames`` -- D_prompt per prompt (latent L2 / frame
  space), averaged over prompts; over each group's rollouts that did not diverge (NaN / inf latents), a
  group with fewer than 2 of them left out (training/rollout_log.py).
* ``seconds_rollout`` / ``seconds_reward`` / ``seconds_update`` -- wall time of each phase on rank 0;
  with ``reward_overlap: groups`` rewards are scored during the rollouts and ``seconds_reward`` is the
  wait for them after the last rollout.
* ``update_skipped`` -- 1 when no rank had a valid sample (no optimizer step this iteration).
* ``empty_steps`` -- optimizer steps of the iteration (over its inner epochs) not taken because none of their
  micro-batches held a valid sample on any rank (``UpdateLog.empty_steps``; possible with
  ``optimizer_steps_per_epoch > 1``); the count is all-reduced, the same on every rank, so rank 0's is logged.
* ``reward_<name>_mean`` -- for a reward that reports components (``RewardBatch.components``; the agent:
  ``T``, ``P``, ``V``, ``failure``, ``unverifiable``), each one's mean over the eligible rewards of all
  ranks; for the 0 / 1 gate inputs, the fraction of them with failure established or an essential
  requirement unverifiable (the rollouts the gated presets score 0).
  A learned reward that rises while ``reward_T_mean`` stays flat is the policy pleasing the reward's
  other parts (reward hacking), which the reward's mean alone cannot show.
* ``reward_usage_<key>`` -- for a reward that reports what scoring cost (``RewardBatch.usage``; the agent:
  ``calls``, ``attempts``, ``images``, ``input_tokens``, ``output_tokens`` of its vision-language model), the sum over
  the iteration's clips on all ranks, ineligible ones included: what an iteration costs the endpoint.
* ``grad_norm`` / ``grad_norm_max`` -- mean and largest global gradient 2-norm of the iteration's optimizer
  steps, before ``gradient_clipping`` (the DeepSpeed JSON's; a norm far above it means most steps are
  clipped); null when no step ran or any step's norm is NaN (fp16 gradients overflowed), whatever its place.
* ``lr`` -- the learning rate of the iteration's first optimizer step (``lr_warmup_steps`` ramps it).
* ``nonfinite_losses`` -- update micro-batches (all ranks) whose loss was NaN or inf, or, for a micro-batch
  without a valid sample, whose one-sample forward was (``UpdateLog.nonfinite_ignored``: its zero loss does not
  keep the NaN out of the gradients): the policy's likelihoods are no longer finite, i.e. training has diverged
  (``nonfinite_loss: stop`` ends the run).
* ``diverged_rollouts`` -- rollouts (all ranks) whose latents held NaN or inf: never scored (ineligible of kind
  nan / inf, as are rewards that returned NaN / inf), so they show no non-finite loss either; they stop a run
  with ``nonfinite_loss: stop`` as ``nonfinite_losses`` do, and the row says which of the two did.
* ``failed_prompts`` -- prompts (all ranks) whose image could not be read this iteration: their groups were
  skipped (training/prompt_failures.py; each one is a line of failed_prompts.jsonl).
"""

from __future__ import annotations

import math
from typing import Any

import torch.distributed as dist

from training.reward_outcome import sum_usage


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def _max(xs: list[float]) -> float:
    """The largest of ``xs``; NaN when there is none or any is NaN, as for `_mean` (``max`` skips a NaN that
    is not first: the result depended on the order of the steps)."""
    return float("nan") if not xs or any(math.isnan(x) for x in xs) else max(xs)


def _std(xs: list[float]) -> float:
    """Population std; exactly 0 for equal values (their float mean can miss them: 1.4e-17 for three 0.1s)."""
    if not xs:
        return float("nan")
    if all(x == xs[0] for x in xs):
        return 0.0
    m = _mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


def _item_mean(values: list[float], counts: list[int]) -> float:
    """Mean of per-micro-batch means weighted by their item counts (a plain mean when the counts do not
    belong to these values, e.g. ``mu_kl`` without a reference); non-finite values are left out."""
    if len(counts) != len(values):
        return _mean([v for v in values if math.isfinite(v)])
    pairs = [(v, c) for v, c in zip(values, counts, strict=True) if math.isfinite(v)]
    total = sum(c for _, c in pairs)
    return sum(v * c for v, c in pairs) / total if total else float("nan")


def progress_postfix(row: dict[str, Any], *, beta: float, steps_per_iteration: int) -> dict[str, str]:
    """What the progress bar shows after an iteration: the eligible reward mean; ``kl_ref`` (``mu_kl``, the
    drift from the reference) when ``beta > 0``; ``kl_old`` (``approx_kl``) only when an iteration takes
    more than one optimizer step: with one, every ratio is measured before the step (rho = 1 up to numerical
    noise), so it is ~0 by construction and said nothing but looked broken."""
    out = {"reward": f"{row['reward_mean']:.4f}"}
    if beta > 0:
        out["kl_ref"] = f"{row['mu_kl']:.2e}"
    if steps_per_iteration > 1:
        out["kl_old"] = f"{row['approx_kl']:.2e}"
    return out


def gather(local: dict[str, Any]) -> list[dict[str, Any]]:
    """All ranks' local metric dicts (a list of one dict without torch.distributed)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [local]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, local)
    return out


def summarize(iteration: int, parts: list[dict[str, Any]]) -> dict[str, float | int]:
    """Combine the ranks' local dicts into the logged row (see module docstring)."""

    def cat(key: str) -> list[Any]:
        return [x for p in parts for x in p[key]]

    def total(key: str) -> int:
        return int(sum(p[key] for p in parts))

    counts = [c for p in parts for c in p.get("item_counts", [])]
    rewards = cat("rewards")
    eligible = [r for r in rewards if r is not None]
    adv = cat("advantages")
    row: dict[str, float | int] = {
        "iteration": iteration,
        "reward_mean": _mean(eligible),
        "reward_std": _std(eligible),
        "eligible_fraction": len(eligible) / len(rewards) if rewards else 0.0,
        "ineligible_count": len(rewards) - len(eligible),
        "skipped_groups": total("skipped_groups"),
        "zero_std_groups": total("zero_std_groups"),
        "adv_mean": _mean(adv),  # NaN (null) without an updated sample, as every statistic of no item: a 0.0
        "adv_std": _std(adv),  # charted an iteration whose rewards were all ineligible as one whose groups agreed
        "adv_abs_max": max((abs(a) for a in adv), default=float("nan")),
        "adv_clipped_fraction": total("adv_clipped") / len(adv) if adv else float("nan"),
        "clip_fraction": _item_mean(cat("clip_fraction"), counts),
        "approx_kl": _item_mean(cat("approx_kl"), counts),
        "mu_kl": _item_mean(cat("mu_kl"), counts),
        "loss": _item_mean(cat("loss"), counts),
        "mask_flip_fraction": _item_mean([x for p in parts for x in p.get("mask_flip_fraction", [])],
                                         [c for p in parts for c in p.get("mask_flip_counts", [])]),
        "mask_mean": _mean(cat("mask_mean")),
        "rollout_diversity": _mean(cat("diversity")),
        "rollout_diversity_frames": _mean(cat("diversity_frames")),
        "seconds_rollout": parts[0]["seconds_rollout"],
        "seconds_reward": parts[0]["seconds_reward"],
        "seconds_update": parts[0]["seconds_update"],
        "update_skipped": int(parts[0]["update_skipped"]),
        "empty_steps": int(parts[0]["empty_steps"]),  # all-reduced: every rank has the same
        "grad_norm": _mean(parts[0]["grad_norms"]),  # a global norm: every rank has the same
        "grad_norm_max": _max(parts[0]["grad_norms"]),
        "lr": float(parts[0]["lr"]),
        "nonfinite_losses": (sum(not math.isfinite(x) for x in cat("loss"))
                             + sum(p.get("nonfinite_ignored", 0) for p in parts)),
        "diverged_rollouts": int(sum(p.get("diverged_rollouts", 0) for p in parts)),
        "failed_prompts": int(sum(p.get("failed_prompts", 0) for p in parts)),
    }
    for kind in ("none", "nan", "inf", "error"):
        row[f"ineligible_{kind}"] = total(f"ineligible_{kind}")
    row.update(component_means([p["components"] for p in parts], "reward_"))
    for key, amount in sum_usage([p["usage"] for p in parts]).items():  # not `total`: the helper above
        row[f"reward_usage_{key}"] = amount
    return row


def component_means(parts: list[dict[str, list[float | None]]], prefix: str) -> dict[str, float]:
    """``{prefix}<name>_mean`` of each reward component over the items of all ranks that have a value (the
    eligible ones; RewardOutcome.components), NaN when none has; a name any rank reports is logged."""
    names = sorted({k for part in parts for k in part})
    return {f"{prefix}{k}_mean": _mean([v for part in parts for v in part.get(k, []) if v is not None]) for k in names}
