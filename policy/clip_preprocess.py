"""Torch preprocessing of Wan 2.1 I2V's CLIP image branch, following the folder's ``image_processor`` config as
transformers' ``CLIPImageProcessor`` does (split out of policy/wan_i2v.py).

``CLIPImageProcessor`` (transformers 5; this project installs no torchvision, so its PIL backend) runs, each step
only where its flag is set: ``do_resize`` (``size``: ``shortest_edge`` -> the short side to it and the long side
to ``int(edge * long / short)``; ``height`` / ``width`` -> exactly that size; ``resample`` 3 bicubic, 2 bilinear
(antialiased) or 0 nearest (PIL's pixel-centre rule: torch's ``nearest-exact``), on uint8 so rounded and
clipped), ``do_center_crop`` (``crop_size``; an image smaller than the crop is padded with zeros around it
first), ``do_rescale`` (times ``rescale_factor``, 1/255 by default), ``do_normalize``
(``(x - image_mean) / image_std``). Missing keys take ``CLIPImageProcessor``'s class defaults.
``do_convert_rgb`` has nothing to do here: the frames are uint8 RGB already (`policy.vae.images_to_tensor`
checks it).

Decisions where the issue was silent: a ``resample`` other than nearest (0), bilinear (2) or bicubic (3) is
refused at load, not approximated; PIL's bicubic resize on uint8 differs from torch's by rounding (about 1/255
per pixel), so results are close to transformers', not bit-exact. Before, every flag was applied whatever the
config said (and a crop larger than the resized image enlarged the resize instead of padding): a config with
``do_center_crop: false`` (or ``do_normalize: false``) got other pixel values than its CLIP model was trained on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from policy.vae import images_to_tensor

Interp = Literal["nearest-exact", "bilinear", "bicubic"]
_RESAMPLE: dict[int, Interp] = {0: "nearest-exact", 2: "bilinear", 3: "bicubic"}  # PIL.Image.Resampling values
_OPENAI_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)  # transformers.image_utils, CLIPImageProcessor defaults
_OPENAI_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


@dataclass(frozen=True)
class ClipPreprocess:
    """One ``CLIPImageProcessor`` config: which steps run and their values (module docstring)."""

    do_resize: bool = True
    shortest_edge: int | None = 224  # None: resize to ``size`` (height, width)
    size: tuple[int, int] | None = None
    resample: Interp = "bicubic"
    do_center_crop: bool = True
    crop: tuple[int, int] = (224, 224)
    do_rescale: bool = True
    rescale_factor: float = 1 / 255
    do_normalize: bool = True
    mean: tuple[float, ...] = _OPENAI_CLIP_MEAN
    std: tuple[float, ...] = _OPENAI_CLIP_STD

    @classmethod
    def from_config(cls, processor: Mapping[str, Any]) -> ClipPreprocess:
        """From a ``preprocessor_config.json`` dict; ValueError for a size or resample it cannot follow."""
        size = processor.get("size", {"shortest_edge": 224})
        shortest, exact = None, None
        if isinstance(size, Mapping) and "shortest_edge" in size:
            shortest = int(size["shortest_edge"])
        elif isinstance(size, Mapping) and "height" in size and "width" in size:
            exact = (int(size["height"]), int(size["width"]))
        elif isinstance(size, int):
            shortest = size  # an old int size: the short side (CLIP's default_to_square=False)
        else:
            raise ValueError(f"image processor size {size!r} is not supported (shortest_edge or height and width)")
        crop = processor.get("crop_size", {"height": 224, "width": 224})
        crop = (int(crop["height"]), int(crop["width"])) if isinstance(crop, Mapping) else (int(crop), int(crop))
        resample = processor.get("resample", 3)
        if resample not in _RESAMPLE:
            raise ValueError(f"image processor resample {resample!r} is not supported (0 nearest, 2 bilinear, "
                             "3 bicubic)")
        return cls(do_resize=bool(processor.get("do_resize", True)), shortest_edge=shortest, size=exact,
                   resample=_RESAMPLE[resample], do_center_crop=bool(processor.get("do_center_crop", True)),
                   crop=crop, do_rescale=bool(processor.get("do_rescale", True)),
                   rescale_factor=float(processor.get("rescale_factor", 1 / 255)),
                   do_normalize=bool(processor.get("do_normalize", True)),
                   mean=tuple(float(v) for v in processor.get("image_mean", _OPENAI_CLIP_MEAN)),
                   std=tuple(float(v) for v in processor.get("image_std", _OPENAI_CLIP_STD)))

    def resize_to(self, h: int, w: int) -> tuple[int, int]:
        """transformers' output size for an ``h`` x ``w`` image: the long side truncated, not rounded."""
        if self.shortest_edge is None:
            assert self.size is not None
            return self.size
        short, long = self.shortest_edge, int(self.shortest_edge * max(h, w) / min(h, w))
        return (short, long) if h <= w else (long, short)

    def __call__(self, images: np.ndarray | Tensor) -> Tensor:
        """uint8 [B, H, W, 3] -> float32 pixel values [B, 3, h, w] as ``CLIPImageProcessor`` makes them."""
        pix = (images_to_tensor(images)[:, :, 0] + 1.0) * 127.5  # 0..255
        if self.do_resize:
            size = self.resize_to(*pix.shape[-2:])
            smooth = self.resample != "nearest-exact"
            pix = F.interpolate(pix, size=size, mode=self.resample, antialias=smooth,
                                align_corners=False if smooth else None)
            pix = pix.round().clamp(0, 255)  # torchvision resizes uint8 to uint8
        if self.do_center_crop:
            pix = center_crop(pix, self.crop)
        if self.do_rescale:
            pix = pix * self.rescale_factor
        if self.do_normalize:
            mean = torch.tensor(self.mean, dtype=pix.dtype).view(1, -1, 1, 1)
            std = torch.tensor(self.std, dtype=pix.dtype).view(1, -1, 1, 1)
            pix = (pix - mean) / std
        return pix


def center_crop(pix: Tensor, crop: tuple[int, int]) -> Tensor:
    """torchvision's centre crop as transformers calls it: zero padding first where the image is smaller."""
    ch, cw = crop
    h, w = pix.shape[-2:]
    if ch > h or cw > w:
        top, left = max(ch - h, 0) // 2, max(cw - w, 0) // 2
        pix = F.pad(pix, (left, max(cw - w, 0) - left, top, max(ch - h, 0) - top))
        h, w = pix.shape[-2:]
    top, left = int((h - ch) / 2.0), int((w - cw) / 2.0)
    return pix[:, :, top:top + ch, left:left + cw]
