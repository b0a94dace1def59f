"""V-JEPA 2 frame preprocessing for the surprise scorer (tools/surprise.py), and its batching per window batch.

Decisions where the issues were silent:
- Preprocessing by hand with torch (no torchvision) as the VJEPA2 video processor does it: the short side
  to ``int(crop * 256 / 224)`` and the long side scaled and truncated to an integer, bilinear *with
  antialiasing* (the processor's torchvision resize; OpenCV's plain bilinear, used before, aliases fine
  texture when shrinking a 448-pixel frame to 292), centre crop to the model's ``crop_size`` with
  torchvision's rounding, scale to [0,1], ImageNet mean/std.
- A frame longer than ``MAX_PREPROCESS_ASPECT`` (8) times its short side is first centre-cropped to that
  aspect ratio (the width kept has the parity of the full one, so the centre stays put). The centre crop
  after the resize keeps at most ``crop`` of the ``int(crop*256/224)`` short side anyway, so this drops
  only pixels the crop would drop, up to a sub-pixel shift; the resize itself made the long side explode
  (16 frames of 2x500 asked for ~41 GB at crop 256). Frames up to 8:1 are processed exactly as before.
- The scorer converts frames per batch of windows (`window_batches`), not the whole clip first: 512 frames
  at crop 256 were ~1.2 GB of float32 at once (and 0.5 GB more as the resize's intermediates). A batch
  converts only the frames its windows cover that the previous batch did not (its shared frames are kept),
  so each frame is converted once, and at most ``(batch_size - 1) * stride + window`` frames (30 by
  default) are held. Every step works frame by frame, so the values are those of converting all at once
  (tests/test_surprise_batched_frames.py checks them bit for bit).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from tools.torch_frames import uint8_tensor

MAX_PREPROCESS_ASPECT = 8
"""Long side / short side above which `preprocess_frames` centre-crops a frame before resizing it (module
docstring), so the resized frame is at most this many squares of the resized short side."""
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)


def window_batches(frames: np.ndarray, starts: Sequence[int], batch_size: int, window: int,
                   crop_size: int) -> Iterator[np.ndarray]:
    """The windows starting at ``starts`` (increasing) of uint8 ``frames`` ``[T,H,W,3]``, ``batch_size`` at a
    time, preprocessed: float32 ``[B,window,3,crop,crop]`` per batch, each frame converted once, only those of
    the batch at hand held (module docstring)."""
    lo = hi = 0  # the frames held: [lo, hi) of the clip
    held = np.empty((0, 3, crop_size, crop_size), np.float32)
    for i in range(0, len(starts), batch_size):
        batch = starts[i:i + batch_size]
        first, last = int(batch[0]), int(batch[-1]) + window
        kept = held[first - lo:] if first < hi else held[:0]
        fresh = preprocess_frames(frames[max(first, hi):last], crop_size) if last > max(first, hi) else held[:0]
        held = np.concatenate([kept, fresh]) if len(kept) else fresh
        lo, hi = first, max(last, hi)
        yield np.stack([held[s - lo:s - lo + window] for s in batch])


def preprocess_frames(frames: np.ndarray, crop_size: int) -> np.ndarray:
    """Resize (short side to ``int(crop*256/224)``, bilinear with antialiasing), centre-crop, ImageNet-normalise
    (the VJEPA2 video processor's steps; module docstring).

    A frame longer than ``MAX_PREPROCESS_ASPECT`` times its short side is centre-cropped to that aspect
    first (module docstring). Returns float32 ``[T,3,crop,crop]``.
    """
    import torch
    import torch.nn.functional as F

    frames = _clip_aspect(frames)
    t, h, w, _ = frames.shape
    short = int(crop_size * 256 / 224)
    nh, nw = (short, int(short * w / h)) if h <= w else (int(short * h / w), short)
    x = uint8_tensor(torch, frames).permute(0, 3, 1, 2)  # channels-last in memory
    x = F.interpolate(x, size=(nh, nw), mode="bilinear", align_corners=False, antialias=True)
    top, left = int(round((nh - crop_size) / 2.0)), int(round((nw - crop_size) / 2.0))
    x = x[:, :, top:top + crop_size, left:left + crop_size].float().div_(255.0)
    mean = torch.from_numpy(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.from_numpy(IMAGENET_STD).view(1, 3, 1, 1)
    return ((x - mean) / std).contiguous().numpy()


def _clip_aspect(frames: np.ndarray) -> np.ndarray:
    """``frames`` ``[T,H,W,3]`` centre-cropped along the long side to ``MAX_PREPROCESS_ASPECT`` times the
    short side (a view; the frames themselves when they are not that long). The kept length has the
    parity of the full one, so the crop is exactly centred."""
    h, w = int(frames.shape[1]), int(frames.shape[2])
    short, long_ = min(h, w), max(h, w)
    keep = MAX_PREPROCESS_ASPECT * short
    if long_ <= keep:
        return frames
    keep += (long_ - keep) % 2
    lo = (long_ - keep) // 2
    return frames[:, :, lo:lo + keep] if w >= h else frames[:, lo:lo + keep]


