"""Per-frame image helpers: normalised crop boxes (with reported full-frame fallback), resizing
by long side (and the size that bounds the short side), frame labels and JPEG data-URL content blocks for the backbone.

Crop boxes are normalised ``[x0, y0, x1, y1]`` in [0, 1]; coordinates within 1e-6 of the unit
range are clamped; each side must cover at least ``MIN_CROP_SIZE`` (2%) of the frame, otherwise
the full frame is used and ``CropResult.reason`` says why. A model that writes thousandths or
pixels has its boxes and points converted first (``tools.coords``). ``tools.video`` re-exports these
names.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from tools.coords import shown_size

MIN_CROP_SIZE = 0.02
FULL_FRAME: tuple[float, float, float, float] = (0.0, 0.0, 1.0, 1.0)
CROP_DECIMALS = 4


@dataclass(frozen=True)
class CropResult:
    """A normalised crop box; ``fallback`` is True (with ``reason``) when the full frame replaced it."""

    box: tuple[float, float, float, float]
    fallback: bool
    reason: str | None


def normalize_crop(box: object) -> CropResult:
    """Validate a normalised ``[x0, y0, x1, y1]`` box; an invalid box becomes the full frame."""

    def full(reason: str) -> CropResult:
        return CropResult(FULL_FRAME, True, f"invalid crop box {box!r}: {reason}; using the full frame")

    if box is None:
        return full("no box given")
    if isinstance(box, str | bytes) or not isinstance(box, Sequence | np.ndarray):
        return full("expected a sequence of 4 numbers [x0, y0, x1, y1]")
    values = list(box)
    if len(values) != 4:
        return full(f"expected 4 numbers [x0, y0, x1, y1], got {len(values)}")
    if any(isinstance(v, bool | np.bool_) or not isinstance(v, int | float | np.integer | np.floating)
           for v in values):
        return full("coordinates must be numbers")
    x0, y0, x1, y1 = (float(v) for v in values)
    if not all(math.isfinite(v) for v in (x0, y0, x1, y1)):
        return full("coordinates must be finite (got NaN or infinity)")
    eps = 1e-6
    if any(v < -eps or v > 1 + eps for v in (x0, y0, x1, y1)):
        return full("coordinates must lie in [0, 1] (normalised, not pixels)")
    x0, y0, x1, y1 = (min(max(v, 0.0), 1.0) for v in (x0, y0, x1, y1))
    if x0 >= x1 or y0 >= y1:
        return full("inverted or empty box (need x0 < x1 and y0 < y1)")
    if x1 - x0 < MIN_CROP_SIZE or y1 - y0 < MIN_CROP_SIZE:
        return full(f"box too small (each side must be at least {MIN_CROP_SIZE} of the frame)")
    return CropResult((x0, y0, x1, y1), False, None)


def crop_key(box: Sequence[float]) -> tuple[float, ...]:
    """A crop box as the frame cache keys and crops it: rounded to ``CROP_DECIMALS`` decimals (validate
    this box, not the exact one: rounding can take a side just over ``MIN_CROP_SIZE`` under it)."""
    return tuple(round(float(b), CROP_DECIMALS) for b in box)


def crop_frame(frame: np.ndarray, box: Sequence[float]) -> np.ndarray:
    """Crop ``[H, W, C]`` to a valid normalised box: columns floor(x0*W)..ceil(x1*W) (end exclusive: every
    pixel the box touches), same for rows. The products are rounded to 9 decimals first: in floating point
    0.07*100 is 7.000000000000001, and its ceil took a pixel the box does not touch."""
    result = normalize_crop(box)
    if result.fallback:
        raise ValueError(f"crop_frame needs a valid box ({result.reason}); call normalize_crop first")
    h, w = frame.shape[:2]
    x0, y0, x1, y1 = result.box
    c0, r0 = min(math.floor(round(x0 * w, 9)), w - 1), min(math.floor(round(y0 * h, 9)), h - 1)
    c1, r1 = max(math.ceil(round(x1 * w, 9)), c0 + 1), max(math.ceil(round(y1 * h, 9)), r0 + 1)
    return np.ascontiguousarray(frame[r0:r1, c0:c1])


def resize_long_side(frame: np.ndarray, long_side: int) -> np.ndarray:
    """Scale so that max(H, W) == ``long_side`` with OpenCV INTER_AREA; never upscales."""
    h, w = frame.shape[:2]
    size = shown_size(w, h, long_side)
    if size == (w, h):
        return frame
    return cv2.resize(frame, size, interpolation=cv2.INTER_AREA)


def fit_short_side(width: int, height: int, short_side: int | None) -> tuple[int, int]:
    """(width, height) scaled so that the short side is at most ``short_side``, aspect kept; never
    upscales; ``None`` keeps the size."""
    if short_side is None or min(width, height) <= short_side:
        return width, height
    if short_side <= 0:
        raise ValueError(f"short_side must be positive, got {short_side}")
    scale = short_side / min(width, height)
    return max(1, round(width * scale)), max(1, round(height * scale))


def tool_size(width: int, height: int, short_side: int | None) -> tuple[int, int]:
    """The size a tool's frames are decoded at: ``fit_short_side``, unless that keeps more than half the
    pixels; then the full size, so the frames a run has already decoded (and cached) serve the tool
    instead of a second decode of the clip (a 480x832 clip and a 448 bound: 87% of the pixels)."""
    size = fit_short_side(width, height, short_side)
    return size if size[0] * size[1] * 2 <= width * height else (width, height)


def frame_label(index: int, total: int, fps: float, t: float | None = None) -> str:
    """Text label sent before each image: ``"frame 12 of 81, t=0.75s"`` (t = the frame's time when given,
    e.g. `VideoMeta.time_of`, else index / fps)."""
    if not fps > 0:
        raise ValueError(f"fps must be positive, got {fps}")
    return f"frame {index} of {total}, t={index / fps if t is None else t:.2f}s"


def encode_jpeg_data_url(frame: np.ndarray, quality: int = 85) -> str:
    """JPEG data URL of a uint8 RGB ``[H, W, 3]`` (or gray ``[H, W]``) frame."""
    if not 1 <= quality <= 100:
        raise ValueError(f"JPEG quality must be in 1..100, got {quality}")
    frame = np.asarray(frame)
    if frame.dtype != np.uint8 or not (frame.ndim == 2 or (frame.ndim == 3 and frame.shape[2] == 3)):
        raise ValueError(f"expected a uint8 [H,W,3] RGB or [H,W] frame, got {frame.dtype} {frame.shape}")
    image = cv2.cvtColor(frame, cv2.COLOR_RGB2BGR) if frame.ndim == 3 else frame
    ok, buf = cv2.imencode(".jpg", image, [int(cv2.IMWRITE_JPEG_QUALITY), int(quality)])
    if not ok:
        raise ValueError(f"JPEG encoding failed for a frame of shape {frame.shape}")
    return "data:image/jpeg;base64," + base64.b64encode(buf.tobytes()).decode("ascii")


def image_content_blocks(frames: np.ndarray, indices: Sequence[int], total: int, fps: float, *,
                         long_side: int = 512, quality: int = 85,
                         labels: Sequence[str] | None = None) -> list[dict]:
    """LangChain/OpenAI content blocks: per frame a text label then its JPEG ``image_url``."""
    if len(frames) != len(indices):
        raise ValueError(f"got {len(frames)} frames but {len(indices)} indices")
    if labels is not None and len(labels) != len(indices):
        raise ValueError(f"got {len(labels)} labels for {len(indices)} frames")
    blocks: list[dict] = []
    for j, (frame, index) in enumerate(zip(frames, indices, strict=True)):
        text = labels[j] if labels is not None else frame_label(int(index), total, fps)
        url = encode_jpeg_data_url(resize_long_side(frame, long_side), quality)
        blocks.append({"type": "text", "text": text})
        blocks.append({"type": "image_url", "image_url": {"url": url}})
    return blocks
