"""Image coordinates as a model writes them, converted to fractions of the frame (pure, no imports
beyond typing, so settings and configs can name the convention cheaply).

Decisions where the issues were silent: "pixels" are those of the image the model was shown (after
``tools.frames.resize_long_side``), not of the decoded frame; Qwen2.5-VL's own resize to multiples of
28 pixels shifts its coordinates by at most a few percent, which a crop tolerates.

One rule for fractions: a fraction ``p`` of a side of ``W`` pixels is the position ``p*W`` along it (pixel
``i`` covers ``[i, i+1)``, its centre at ``i + 0.5``). Boxes use it as is: a crop takes every pixel the box
touches (``tools.frames.crop_frame``) and a motion-summary region every point whose centre it holds,
half-open (``tools.motion.summary``). A *point* handed to a tracker is ``p*(W-1)`` in the tracker's pixel
centres (``graph.nodes.tracking``): 0 and 1 are the centres of the edge pixels, so every point the model
gives lies inside the image, as trackers require; that is within half a pixel of ``p*W - 0.5``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

Coordinates = Literal["unit", "per_mille", "pixels"]
"""How a model writes image positions: "unit" fractions of the width and height (0..1), "per_mille"
thousandths (0..1000: Qwen2-VL, Qwen3-VL, InternVL grounding), "pixels" of the image it was shown
(Qwen2.5-VL)."""


def _scales(coordinates: Coordinates, size: tuple[int, int]) -> tuple[float, float]:
    """What one unit of the width and of the height is in ``coordinates`` (``size``: the shown image's)."""
    if coordinates == "unit":
        return 1.0, 1.0
    if coordinates == "per_mille":
        return 1000.0, 1000.0
    if coordinates == "pixels":
        return float(size[0]), float(size[1])
    raise ValueError(f"coordinates must be 'unit', 'per_mille' or 'pixels', got {coordinates!r}")


def to_unit_coords(values: Sequence[float], coordinates: Coordinates, size: tuple[int, int]) -> list[float]:
    """``values``, alternating x and y (a box ``[x0, y0, x1, y1]`` or a point ``[x, y]``), as fractions of
    the width and height; ``size`` is the (width, height) of the image the model saw ("pixels")."""
    sx, sy = _scales(coordinates, size)
    return [float(v) / (sx if k % 2 == 0 else sy) for k, v in enumerate(values)]


def shown_size(width: int, height: int, long_side: int) -> tuple[int, int]:
    """(width, height) of a ``width x height`` frame after ``resize_long_side(frame, long_side)``."""
    if long_side <= 0:
        raise ValueError(f"long_side must be positive, got {long_side}")
    if max(width, height) <= long_side:
        return width, height
    scale = long_side / max(width, height)
    return max(1, round(width * scale)), max(1, round(height * scale))


def from_unit_coords(values: Sequence[float], coordinates: Coordinates, size: tuple[int, int]) -> list[float]:
    """The inverse of `to_unit_coords`: fractions ``values`` (alternating x and y) written in ``coordinates``;
    ``size`` is the (width, height) of the image the model saw ("pixels")."""
    sx, sy = _scales(coordinates, size)
    return [float(v) * (sx if k % 2 == 0 else sy) for k, v in enumerate(values)]
