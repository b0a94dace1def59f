"""Videos a training run writes for people to look at (never read back by training).

* Held-out samples (``eval_videos: save``, training/evaluate.py):
  ``OUTPUT_DIR/eval_videos/iter_NNNNNN/pPPP_sSS.mp4`` -- one file name is the same prompt and noise at
  every evaluation.
* Training rollouts (``rollout_videos_every: N``, training/trainer.py): every N-th iteration each rank
  writes its groups to ``OUTPUT_DIR/rollout_videos/iter_NNNNNN/rR_gG_sSS.mp4`` (rank, its prompt group,
  sample), named in that iteration's rewards.jsonl lines with the reward and advantage, so a group's
  clips can be compared with the rewards that ranked them. A diverged rollout (NaN / inf latents) gets no
  file: its line has ``video: null`` and ``video_skipped`` (training/rollout_log.py).

Decision where the issues were silent: a video that cannot be written (disk full, permissions, the
encoder failing: any of PyAV's ``FFmpegError``, not all of which are OSError or ValueError) is reported once per batch on stderr and logged as ``video: null``; the rewards still count and training
goes on. The files are for looking at; the rewards are the result. A fresh run in a used output_dir
overwrites the files it writes and leaves older ones; the jsonl lines (which a fresh run starts anew)
name the current run's.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def eval_video_name(iteration: int, prompt: int, sample: int) -> str:
    """Where a held-out sample goes, relative to the output folder."""
    return f"eval_videos/iter_{iteration:06d}/p{prompt:03d}_s{sample:02d}.mp4"


def rollout_video_name(iteration: int, rank: int, group: int, sample: int) -> str:
    """Where a training rollout goes, relative to the output folder."""
    return f"rollout_videos/iter_{iteration:06d}/r{rank}_g{group}_s{sample:02d}.mp4"


def write_samples(output_dir: str | Path, clips: Sequence[tuple[str, np.ndarray]], fps: float,
                  what: str) -> list[str | None]:
    """Write each ``(name, frames)`` as mp4 under ``output_dir``; per clip its name, or None when it could
    not be written. After the first failure (one line on stderr naming ``what``) no more are tried."""
    from av.error import FFmpegError

    from tools.video import write_video

    names: list[str | None] = []
    failed = False
    for name, frames in clips:
        if failed:
            names.append(None)
            continue
        path = Path(output_dir) / name
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_video(path, frames, fps=fps)
            names.append(name)
        except (OSError, RuntimeError, ValueError, FFmpegError) as exc:
            failed = True
            names.append(None)
            print(f"could not write {what} ({path}: {exc}); their rewards are logged without videos",
                  file=sys.stderr, flush=True)
    return names
