"""What training/trainer.py records about an iteration's rollouts, beside the update: the rollout videos
(``rollout_videos_every``, written by training/videos.py), the diversity metrics (evals/diversity.py) and
the per-rollout rewards.jsonl rows (training/metrics_log.py writes them).

Decisions where the issue was silent, for a diverged rollout (NaN / inf latents: training/decode.py leaves
its frames black and the reward never scores it):

* ``mask_mean`` is over the (rollout, SDE step) items of the rollouts that did not diverge (`mask_means`).
* ``diversity`` / ``diversity_frames`` are D_prompt over the group's rollouts that did not diverge (its
  latents would make the latent distance NaN or inf, and its black placeholder frames are no video the
  policy made). A group with fewer than 2 of them has no value (the pairwise mean is undefined) and is
  left out of the iteration's mean, which is null in metrics.jsonl when no group on any rank has one.
* No video is written for it (a black mp4 would pass for something the policy generated): its
  rewards.jsonl row has ``video: null`` and ``video_skipped`` saying why. Only rows of an iteration that
  writes videos have either field.

The stand-in rollouts of a prompt whose image could not be read (training/prompt_failures.py) are left out
the same way: the functions below take, per clip, None or why it is left out: a diverged kind ("nan" /
"inf") or the skipped prompt's reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch

from evals.diversity import d_prompt, d_prompt_frames
from training.config import TrainConfig
from training.reward_outcome import RewardOutcome
from training.update import Group
from training.videos import rollout_video_name, write_samples


def _write_some(out_dir: Path, clips: list[tuple[str, np.ndarray] | None], fps: float, what: str) -> list[str | None]:
    """`write_samples` of the clips that are not None; per clip its name, None for one not written."""
    names = iter(write_samples(out_dir, [c for c in clips if c is not None], fps, what))
    return [None if c is None else next(names) for c in clips]


def submit_rollout_videos(writer: ThreadPoolExecutor, out_dir: Path, groups: list[Group], cfg: TrainConfig,
                          iteration: int, rank: int,
                          diverged: Sequence[str | None]) -> Future[list[str | None]] | None:
    """With ``rollout_videos_every`` and ``iteration`` on its schedule, the groups' clips written to mp4 on
    ``writer`` (in the background while the update runs); the future holds each clip's name or None. A clip
    whose ``diverged`` kind (per clip, in group order) is set is not written (module docstring). None when
    the iteration writes no videos."""
    if not (cfg.rollout_videos_every and iteration % cfg.rollout_videos_every == 0):
        return None
    clips = [(rollout_video_name(iteration, rank, gi, s), clip) for gi, g in enumerate(groups)
             for s, clip in enumerate(g.frames)]
    kept = [None if kind else clip for clip, kind in zip(clips, diverged, strict=True)]
    return writer.submit(_write_some, out_dir, kept, cfg.fps, f"iteration {iteration}'s rollout videos")


def diversity(groups: list[Group], diverged: Sequence[str | None]) -> dict[str, list[float]]:
    """D_prompt per group, in latent space (``diversity``) and frame space (``diversity_frames``), over the
    group's rollouts whose ``diverged`` kind (per clip, in group order) is None; a group with fewer than 2
    of them has no entry (module docstring)."""
    if sum(len(g.frames) for g in groups) != len(diverged):
        raise ValueError(f"diversity: {len(diverged)} diverged flags for {sum(len(g.frames) for g in groups)} "
                         "rollouts")
    out: dict[str, list[float]] = {"diversity": [], "diversity_frames": []}
    first = 0
    for g in groups:
        size = len(g.frames)
        keep = [s for s in range(size) if diverged[first + s] is None]
        first += size
        if len(keep) < 2:
            continue
        out["diversity"].append(d_prompt(g.rollout.latents[keep]))
        out["diversity_frames"].append(d_prompt_frames(g.frames[keep]))
    return out


def mask_means(groups: list[Group], diverged: Sequence[str | None]) -> list[float]:
    """The mean DynDiff mask M of each (rollout, SDE step) item of the groups' rollouts whose ``diverged`` kind
    (per clip, in group order) is None: the items ``mask_mean`` averages over all ranks. A diverged rollout's
    mask is NaN from the step its x0 became NaN on, and it made the whole iteration's mask_mean null."""
    if sum(len(g.frames) for g in groups) != len(diverged):
        raise ValueError(f"mask_means: {len(diverged)} diverged flags for {sum(len(g.frames) for g in groups)} "
                         "rollouts")
    out: list[float] = []
    first = 0
    for g in groups:
        keep = [s for s in range(len(g.frames)) if diverged[first + s] is None]
        first += len(g.frames)
        out += [float(v) for step in g.rollout.steps for v in step.mask_mean.float()[keep].tolist()]
    return out


def video_skipped(kind: str | None) -> str | None:
    """Why a rollout left out as ``kind`` ("nan" / "inf": it diverged; another text: its prompt was skipped, the
    text says why; None: it was not left out) has no video."""
    if kind is None:
        return None
    if kind not in ("nan", "inf"):
        return f"{kind}; no video written"
    return f"rollout diverged: its latents hold {'NaN' if kind == 'nan' else 'inf'}; no video written"


def reward_items(outcome: RewardOutcome, texts: list[str], group_ids: list[int], group: int, rank: int,
                 adv: torch.Tensor, valid: torch.Tensor, names: list[str | None] | None,
                 diverged: Sequence[str | None]) -> list[dict[str, Any]]:
    """One rewards.jsonl row per rollout of this rank: where it sits, its reward, its advantage (None when it
    did not update), its video's name when the iteration wrote videos (with ``video_skipped`` for a
    ``diverged`` one: module docstring), its run id (null when the outcome records none:
    `RewardOutcome.run_id`), its reward components if any; an ineligible one's ``reason`` and
    ``ineligible_kind`` (`ineligible_fields`)."""
    return [{"rank": rank, "group": gi, "sample": i % group, "prompt": texts[i],
             "reward": outcome.rewards[i], "run_id": outcome.run_id(i), **ineligible_fields(outcome, i),
             "advantage": float(adv[i]) if bool(valid[i]) else None,
             **({"video": names[i]} if names is not None else {}),
             **({"video_skipped": video_skipped(diverged[i])} if names is not None and diverged[i] else {}),
             **({"components": {k: v[i] for k, v in outcome.components.items()}}
                if outcome.components else {})}
            for i, gi in enumerate(group_ids)]


def ineligible_fields(outcome: RewardOutcome, i: int) -> dict[str, Any]:
    """For an ineligible item ``i``: its ``reason`` (as ineligible.jsonl writes it, "ineligible" when none was
    given) and ``ineligible_kind`` (none / nan / inf / error; None when the outcome does not say); nothing for
    an eligible one. A row with a null reward said nothing else: its reason was only in ineligible.jsonl, by
    iteration and prompt, which the rollouts of a group share."""
    if outcome.rewards[i] is not None:
        return {}
    return {"reason": outcome.reasons[i] or "ineligible",
            "ineligible_kind": outcome.kind(i)}


def ineligible_items(outcome: RewardOutcome, texts: list[str]) -> list[dict[str, Any]]:
    """The ineligible.jsonl lines of a rank's ineligible items (without the iteration, training/metrics_log.py adds
    it): the prompt of each, its reason and its ``ineligible_kind`` (`ineligible_fields`), so the file says
    whether a null reward was an outage (``error``) or the agent's verdict on the clip (``none``), as rewards.jsonl
    does; it said the reason only."""
    return [{"prompt": texts[i], **ineligible_fields(outcome, i)}
            for i, r in enumerate(outcome.rewards) if r is None]
