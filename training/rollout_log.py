"""What training/trainer.py records about an iteration's rollouts, beside the update: the rollout videos
(``rollout_videos_every``, written by training/videos.py), the diversity metrics (evals/diversity.py) and
the per-rollout rewards.jsonl rows (training/metrics.py writes them)."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from evals.diversity import d_prompt, d_prompt_frames
from training.config import TrainConfig
from training.reward_outcome import RewardOutcome
from training.update import Group
from training.videos import rollout_video_name, write_samples


def submit_rollout_videos(writer: ThreadPoolExecutor, out_dir: Path, groups: list[Group], cfg: TrainConfig,
                          iteration: int, rank: int) -> Future[list[str | None]] | None:
    """With ``rollout_videos_every`` and ``iteration`` on its schedule, the groups' clips written to mp4 on
    ``writer`` (in the background while the update runs); the future holds each clip's name or None. None
    when the iteration writes no videos."""
    if not (cfg.rollout_videos_every and iteration % cfg.rollout_videos_every == 0):
        return None
    clips = [(rollout_video_name(iteration, rank, gi, s), clip) for gi, g in enumerate(groups)
             for s, clip in enumerate(g.frames)]
    return writer.submit(write_samples, out_dir, clips, cfg.fps, f"iteration {iteration}'s rollout videos")


def diversity(groups: list[Group]) -> dict[str, list[float]]:
    """D_prompt per group, in latent space (``diversity``) and frame space (``diversity_frames``)."""
    return {"diversity": [d_prompt(g.rollout.latents) for g in groups],
            "diversity_frames": [d_prompt_frames(g.frames) for g in groups]}


def reward_items(outcome: RewardOutcome, texts: list[str], group_ids: list[int], group: int, rank: int,
                 adv: torch.Tensor, valid: torch.Tensor, names: list[str | None] | None) -> list[dict[str, Any]]:
    """One rewards.jsonl row per rollout of this rank: where it sits, its reward, its advantage (None when it
    did not update), its video's name when the iteration wrote videos, its reward components if any."""
    return [{"rank": rank, "group": gi, "sample": i % group, "prompt": texts[i],
             "reward": outcome.rewards[i], "run_id": outcome.run_ids[i],
             "advantage": float(adv[i]) if bool(valid[i]) else None,
             **({"video": names[i]} if names is not None else {}),
             **({"components": {k: v[i] for k, v in outcome.components.items()}}
                if outcome.components else {})}
            for i, gi in enumerate(group_ids)]
