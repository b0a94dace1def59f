"""Verifiable rewards on decoded frames for GRPO training: brightness and motion inside a target region
(normalised box ``[x0, y0, x1, y1]``), in [0, 1]. A malformed clip (not uint8 [T, H, W, 3], or with
no frame or no pixel) is ineligible (None) without affecting the other clips. Re-exported by
``training.rewards`` (where ``build_reward`` makes them from a config).

Frame 0 is the conditioning frame (every policy here is image-to-video: it is decoded from the clean
first-frame latent, which the policy does not sample). Both rewards count exactly the terms the policy's
samples change: the brightness reward leaves frame 0 out by default (``skip_first``; its brightness is
fixed by the input image and would only dilute the signal), while the motion reward keeps the change from
frame 0 to frame 1, as intended: frame 1 is generated, and a jump away from the input image at the start
is motion the policy made (leaving it out would let ``target: less`` reward a clip that cuts away from
the input and then holds still)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np


def _validate_box(region: Any, name: str) -> tuple[float, float, float, float]:
    """`region` as a float box; ValueError naming the reward unless it is a list (or tuple) of 4 numbers,
    normalised and non-empty (a string such as "0011" was read character by character, a mapping by its keys)."""
    if not isinstance(region, list | tuple) or len(region) != 4 or \
            not all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in region):
        raise ValueError(f"{name}: region must be a list of 4 numbers [x0, y0, x1, y1], got {region!r}")
    x0, y0, x1, y1 = (float(v) for v in region)
    if not (0.0 <= x0 < x1 <= 1.0 and 0.0 <= y0 < y1 <= 1.0):
        raise ValueError(f"{name}: region must be normalised with 0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1, "
                         f"got {list(region)}")
    return x0, y0, x1, y1


def _crop_clip(video: Any, box: tuple[float, float, float, float]) -> np.ndarray | None:
    if not isinstance(video, np.ndarray) or video.dtype != np.uint8 or video.ndim != 4 or video.shape[-1] != 3:
        return None
    if 0 in video.shape[:3]:  # no frame, or frames without a pixel: the mean of nothing was NaN (kind nan)
        return None
    h, w = video.shape[1:3]
    x0, y0, x1, y1 = box
    r0, r1 = _edges(y0, y1, h)
    c0, c1 = _edges(x0, x1, w)
    return video[:, r0:r1, c0:c1]


def _edges(lo: float, hi: float, size: int) -> tuple[int, int]:
    """Pixel range [start, stop) covering the fractions [lo, hi] of `size` pixels (at least one pixel). A product
    a rounding error away from a whole pixel is that pixel: 0.29 * 100 is 28.999999999999996, and a plain floor
    took column 28 into a box that starts at 29. A start that rounds up onto ``size`` (``lo`` within 1e-9/size
    of 1.0) is the last pixel, not one past it (an empty crop, a NaN reward)."""
    start = min(int(math.floor(lo * size + 1e-9)), size - 1)
    return start, max(int(math.ceil(hi * size - 1e-9)), start + 1)


@dataclass
class BrightnessReward:
    """Mean brightness (pixel value / 255) of the decoded frames inside ``region``; in [0, 1]."""

    region: tuple[float, float, float, float] = (0.0, 0.0, 1.0, 1.0)
    """Normalised box [x0, y0, x1, y1]."""
    target: Literal["bright", "dark"] = "bright"
    """bright: reward = brightness; dark: reward = 1 - brightness."""
    skip_first: bool = True
    """Leave out frame 0 (the conditioning frame the policy does not generate)."""

    def __post_init__(self) -> None:
        self.region = _validate_box(self.region, "BrightnessReward")
        if self.target not in ("bright", "dark"):
            raise ValueError(f"BrightnessReward: target must be 'bright' or 'dark', got {self.target!r}")
        if not isinstance(self.skip_first, bool):  # the text "no" is truthy: it skipped the first frame
            raise ValueError(f"BrightnessReward: skip_first must be true or false, got {self.skip_first!r}")

    def __call__(self, videos: Sequence[np.ndarray], prompts: Sequence[str], **meta: Any) -> list[float | None]:
        out: list[float | None] = []
        for video in videos:
            crop = _crop_clip(video, self.region)
            if crop is not None and self.skip_first:
                crop = crop[1:] if crop.shape[0] > 1 else None
            if crop is None:
                out.append(None)
                continue
            value = float(crop.mean(dtype=np.float64) / 255.0)
            out.append(value if self.target == "bright" else 1.0 - value)
        return out


@dataclass
class MotionReward:
    """Mean absolute change between consecutive decoded frames inside ``region`` (/255); in [0, 1]. The
    change from the conditioning frame 0 to frame 1 counts (module docstring)."""

    region: tuple[float, float, float, float] = (0.0, 0.0, 1.0, 1.0)
    """Normalised box [x0, y0, x1, y1]."""
    target: Literal["more", "less"] = "more"
    """more: reward = motion; less: reward = 1 - motion."""

    def __post_init__(self) -> None:
        self.region = _validate_box(self.region, "MotionReward")
        if self.target not in ("more", "less"):
            raise ValueError(f"MotionReward: target must be 'more' or 'less', got {self.target!r}")

    def __call__(self, videos: Sequence[np.ndarray], prompts: Sequence[str], **meta: Any) -> list[float | None]:
        out: list[float | None] = []
        for video in videos:
            crop = _crop_clip(video, self.region)
            if crop is None or crop.shape[0] < 2:
                out.append(None)
                continue
            diff = np.abs(np.diff(crop.astype(np.int16), axis=0)).mean(dtype=np.float64) / 255.0
            out.append(float(diff) if self.target == "more" else 1.0 - float(diff))
        return out
