"""Rollout diversity per prompt (paper Sec. 5.3, DESIGN.md §6 "rollout diversity").

``D_prompt = 2 / (N (N - 1)) * sum_{i<j} d(x_i, x_j)``: the mean pairwise distance between the N
rollouts of one prompt.

* :func:`d_prompt` -- d is the L2 norm of the flattened difference (latent space).
* :func:`d_prompt_frames` -- d is the mean absolute pixel difference of decoded uint8 frames
  normalised to [0, 1] (frame space; 0 = identical clips, 1 = black vs white everywhere).

Decisions where the issue was silent: latent distances are accumulated in float64, frame distances
exactly in int64 one frame pair at a time; fewer than 2 samples is an error (the pairwise mean is
undefined), as are frames that are not uint8 and empty samples (no frames or pixels: their distance
is undefined, not 0).
"""

from __future__ import annotations

import numpy as np
import torch


def _as_float64(samples: torch.Tensor | np.ndarray, name: str) -> torch.Tensor:
    x = torch.as_tensor(samples) if isinstance(samples, np.ndarray) else samples
    if x.dim() < 1 or x.shape[0] < 2:
        raise ValueError(f"{name}: need at least 2 samples along dim 0, got shape {tuple(x.shape)}")
    if x[0].numel() == 0:
        raise ValueError(f"{name}: the samples are empty (shape {tuple(x.shape)})")
    return x.detach().to(device="cpu", dtype=torch.float64).reshape(x.shape[0], -1)


def d_prompt(samples: torch.Tensor | np.ndarray) -> float:
    """Mean pairwise L2 distance between N samples [N, ...] (paper Sec. 5.3 D_prompt, latent space)."""
    flat = _as_float64(samples, "d_prompt")
    return float(torch.nn.functional.pdist(flat, p=2).mean())


def d_prompt_frames(frames: torch.Tensor | np.ndarray) -> float:
    """Mean pairwise frame-space distance between N decoded clips [N, T, H, W, 3] uint8.

    d(x_i, x_j) = mean over pixels of |x_i - x_j| / 255, so the result lies in [0, 1]. Pairs are
    compared one frame at a time in int16, so memory stays at one frame pair (720p clips are fine).
    """
    dtype = frames.dtype
    if dtype not in (np.uint8, torch.uint8):
        raise ValueError(f"d_prompt_frames: frames must be uint8, got {dtype}")
    arr = frames.detach().cpu().numpy() if isinstance(frames, torch.Tensor) else np.asarray(frames)
    if arr.ndim < 2 or arr.shape[0] < 2:
        raise ValueError(f"d_prompt_frames: need at least 2 samples along dim 0, got shape {arr.shape}")
    n = arr.shape[0]
    per_sample = arr[0].size
    if per_sample == 0:
        raise ValueError(f"d_prompt_frames: the clips hold no pixels (shape {arr.shape})")
    total = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            acc = 0
            for a, b in zip(arr[i], arr[j], strict=True):  # along dim 1 (frames)
                acc += int(np.abs(a.astype(np.int16) - b.astype(np.int16)).sum(dtype=np.int64))
            total += acc / (255.0 * per_sample)
    return total / (n * (n - 1) / 2)
