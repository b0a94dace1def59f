"""Summaries of motion tracks for the reward agent (numbers and a short text), never a verdict.

Definitions (decisions where the issue was silent):
- A point *moves* between consecutive tracked frames when both are reliably tracked and its *speed*
  (step length / clip frames between the two tracked frames, ``np.diff(frame_indices)``) exceeds
  ``speed_threshold`` pixels per clip frame. An earlier version compared the raw step with a fixed
  pixel threshold (0.4% of the diagonal), so the verdict depended on the sampling: the agent tracks
  at most 32 frames of a stretch (gaps of 1 to 10 clip frames, rounded linspace alternating 3 and 4),
  and the same steady motion read "0 points moved" over a short stretch, "moving" over a long one,
  and fell apart into one-frame segments where the gaps alternated.
- Default speed threshold: 0.1% of the frame diagonal per clip frame, at least 0.1 px (0.72 px/frame
  at 512x512: a hand or object crossing the frame's width in 700 frames, ~25 s at 30 fps, is at the
  threshold, so typical robot motion is detected even when every frame is tracked). The old 2.9 px per
  step missed steady motion of up to 2.9 px/frame when every frame was tracked.
- Noise floor: a fast step moves only when the point is also displaced by more than ``NOISE_FLOOR_PX``
  (2.5 px) around it: from its position ``NOISE_HALF_WINDOW`` (2) tracked steps before the step to its
  position after it, or from its position before the step to its position 2 steps after it
  (`tools.motion.steps.window_displacement`; positions are vector sums of the tracked steps, so jitter
  cancels, never adds up). Tracker noise is a position error, not a speed, and it is about the same number of pixels at
  every frame size: LK on a still textured clip with fresh sensor noise (8x8 grid on the first, middle
  and last of 32 frames) gave steps of p99 0.45 / 0.39 / 0.40 px at 128 / 256 / 512 px (sigma 3 grey
  levels) and 0.84 / 0.75 / 0.76 px (sigma 5), at most 1.8 px, and window displacements of at most
  1.74 px (sigma 5, three seeds, 128 and 256 px). The speed threshold alone, a share of the diagonal,
  is 0.18 px/frame at 128x128, under that jitter: a still clip read 63 of 64 points moved (sigma 3,
  128 px) and 63 of 64 (sigma 5, 256 px; 18 of 64 even at 512). 2.5 px is above every measured noise
  displacement, and still lets steady motion of ~0.85 px/frame and faster name its frames when every
  frame is tracked (1 px/frame: 3 px over the window; tests/test_motion_noise_floor.py); slower motion
  counts by net displacement alone. The floor is in pixels of the frames the tracks are given in, so a
  motion of a few pixels can count at one size and not at half that size: at the smaller size the
  tracker cannot tell it from its noise. Heavier noise (sigma 8 at 128 px) gave window displacements up
  to 3.8 px; pass a larger ``noise_floor`` there. A single noisy position (two opposite steps) is not
  motion; a short move out and back is (each end of the window is measured from the step).
- A point also counts as *moved* when its net displacement exceeds ``net_threshold`` pixels
  (default 2% of the diagonal, at least the noise floor; ~14 px at 512x512), so motion slower than the
  speed threshold everywhere (a slow push) is not reported as "no motion"; such a track names no
  moving frames (no step was fast enough to place it in time).
- A point's *net displacement* is the distance from its first to its last tracked position, in clip
  order. It was measured from the query position, which is the first tracked frame only for points
  queried there: a point the agent gave on the later end of a stretch (track_motion with
  end_frame < start_frame) read 0 px however far it had come.
- A track belongs to the region that contains its query position. Regions are normalised boxes
  ``[x0,y0,x1,y1]`` (fractions of the frame; a box outside 0..1 or empty is a ValueError, since a box in
  pixels would cover the whole frame); without regions a 3x3 grid (``top-left`` ... ``bottom-right``) is used.
  A box spans ``[x0, x1) x [y0, y1)`` of the frame (pixel ``i`` covers ``[i - 0.5, i + 0.5)``), closed where it
  ends at 1: a point on the edge two boxes share belongs to the right / lower one. Closed on both sides, it
  counted in both (a 2x2 grid split at 0.25 put 6 of its 4 points in two regions).
- *Co-motion* of two caller-given regions (e.g. ``gripper`` and ``cup``): frames where the mean step
  of each region's moving points exceeds the threshold and the two steps point the same way
  (cosine > 0.7). It is reported as a contact hint, not proof of contact.
- At most ``MAX_REGIONS`` (16) regions, a ValueError beyond (the tool service answers 400): co-motion
  looks at every pair (120 for 16), and the summary used to cut regions and pairs to 64 silently after
  computing them all (1000 regions: half a million pairs, 40 s). The agent passes none (the 3x3 grid).
- The text names its axes (from the top-left corner, y growing downwards): a lift read "dy=-20.0", which a
  model taking y as growing upwards (the plot convention) read as a move down.
- Positions in the text (track starts and ends, region boxes) are written in the convention the reader
  writes its own coordinates in (`MotionSummary.text`'s ``coordinates``, `tools.coords`): fractions,
  thousandths, or pixels of the image it was shown (``shown``), said once in the text. Track ends were
  pixels of the tracked frames beside boxes in fractions, and a model writing fractions or thousandths
  that copied "(64,80)" into its next track_motion or view_crop call had it clamped to the frame's edge.
  A track position ``x`` (tracker pixel centres, 0..W-1) is the fraction ``x / (W - 1)``, the inverse of
  the rule that turns the model's points into tracker pixels (`tools.coords`), so a position copied back
  lands on the tracked point; in pixels that reads up to 1 px above ``x`` (the last pixel is W: the frame's
  edge, as the model's own [0, 0, W, H] box). A position off the frame stays off it (a fraction past 0..1).
  Displacements, speeds and thresholds stay in pixels of the tracked frames (``frame_size``), labelled
  "px" with that size: the agent summarises tracks at the size it shows the frames, so there they are the
  shown frames' pixels whatever the convention, and a distance in fractions would be a different number
  along x and along y. ``text()`` without arguments writes pixels of the tracked frames (callers outside
  the agent); the JSON fields (`MotionSummary` itself, the tool service's answer) stay in tracker pixels.
- Frame numbers in the output are original clip indices (``MotionTracks.frame_indices``). Tracks whose
  frames are not in increasing clip order (`MotionTracks` built by a caller; the tool service and the agent
  now refuse such ``frame_indices`` before tracking, `tools.sampling.order_problem`) are summarised in clip order: the tracked frames are sorted first (stable, so a
  repeated frame keeps its place; the gap to it counts as one frame). Taken as given, a stretch tracked
  backwards read as motion the other way, and its "motion frames" ran backwards ([20, 0]).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np
from pydantic import BaseModel, Field

from tools.coords import Coordinates, from_unit_coords
from tools.motion.base import MotionTracks
from tools.motion.steps import (
    NOISE_FLOOR_PX,
    default_thresholds,
    in_clip_order,
    segments,
    step_motion,
)

GRID_NAMES = ["top-left", "top", "top-right", "left", "centre", "right", "bottom-left", "bottom", "bottom-right"]
COMOTION_COSINE = 0.7
MAX_REGIONS = 16
"""Most regions a summary takes (module docstring); co-motion has one entry per pair of them."""
MAX_PAIRS = MAX_REGIONS * (MAX_REGIONS - 1) // 2


class RegionMotion(BaseModel):
    """Motion of the tracks that start inside one region."""

    name: str = Field(description="region name", max_length=64)
    box: tuple[float, float, float, float] = Field(description="normalised [x0,y0,x1,y1]")
    points: int = Field(ge=0, description="tracks whose query point lies in the region")
    moving_points: int = Field(ge=0, description="tracks in the region that moved at some frame")
    tracked_fraction: float = Field(ge=0, le=1, description="share of point-frames reliably tracked")
    median_displacement_px: float = Field(ge=0, description="median net displacement of the region's tracks")
    mean_shift_px: tuple[float, float] = Field(description="mean net displacement (dx, dy) in pixels")
    motion_frames: list[int] = Field(description="first and last clip frame with motion; empty if none",
                                     max_length=2)


class TrackMotion(BaseModel):
    """One of the tracks that moved the most."""

    index: int = Field(ge=0, description="track index")
    start: tuple[float, float] = Field(description="(x, y) at the first tracked frame")
    end: tuple[float, float] = Field(description="(x, y) at the last tracked frame")
    displacement_px: float = Field(ge=0, description="net displacement")
    motion_frames: list[int] = Field(description="first and last clip frame with motion; empty when only the "
                                                 "net displacement moved it", max_length=2)


class CoMotion(BaseModel):
    """Two regions moving together (a contact hint, not proof)."""

    region_a: str = Field(max_length=64)
    region_b: str = Field(max_length=64)
    together_frames: int = Field(ge=0, description="frames where both move the same way")
    share_of_a_motion: float = Field(ge=0, le=1, description="together frames / frames where region_a moves")
    segments: list[tuple[int, int]] = Field(description="clip-frame spans of co-motion", max_length=32)


class MotionSummary(BaseModel):
    """Compact motion evidence for the agent."""

    frames: int = Field(ge=0)
    points: int = Field(ge=0)
    frame_size: tuple[int, int] = Field(description="(height, width)")
    tracked_fraction: float = Field(ge=0, le=1, description="share of point-frames reliably tracked")
    moving_points: int = Field(ge=0)
    speed_threshold_px: float = Field(ge=0, description="speed (px per clip frame) above which a step moves")
    noise_floor_px: float = Field(ge=0, description="displacement (px) around a step that it must also exceed")
    net_threshold_px: float = Field(ge=0, description="net displacement (px) above which a track moved")
    active_segments: list[tuple[int, int]] = Field(description="clip-frame spans with any motion", max_length=64)
    regions: list[RegionMotion] = Field(max_length=MAX_REGIONS)
    top_tracks: list[TrackMotion] = Field(max_length=16)
    comotion: list[CoMotion] = Field(max_length=MAX_PAIRS)

    def text(self, coordinates: Coordinates = "pixels", shown: tuple[int, int] | None = None) -> str:
        """A few lines the LLM can read; tracks are supporting evidence only. Positions (track ends, region
        boxes) are written in ``coordinates`` (`tools.coords`): "pixels" of an image of ``shown`` (width,
        height; default the tracked frames' own size), fractions or thousandths; displacements are pixels of
        the tracked frames (module docstring)."""
        h, w = self.frame_size
        size = shown if shown is not None else (w, h)

        def point(p: tuple[float, float]) -> str:
            unit = (p[0] / max(w - 1, 1), p[1] / max(h - 1, 1))  # tools.coords' point rule, inverted
            return "(" + ",".join(_number(v, coordinates, 3) for v in from_unit_coords(unit, coordinates, size)) + ")"

        def box(b: Sequence[float]) -> str:
            return "[" + ",".join(_number(v, coordinates, 2) for v in from_unit_coords(b, coordinates, size)) + "]"

        lines = [f"Motion tracks: {self.points} points over {self.frames} frames ({w}x{h}); "
                 f"{self.tracked_fraction:.0%} of point-frames reliably tracked; {self.moving_points} points "
                 f"moved (speed > {self.speed_threshold_px:.2g} px/frame over more than {self.noise_floor_px:.2g} px, "
                 f"or net > {self.net_threshold_px:.0f} px; tracker jitter below that is not motion)."]
        lines.append("Motion in frames: " + (_spans(self.active_segments) or "none") + ".")
        lines.append(f"Positions (x, y) and region boxes [x0,y0,x1,y1] are {_convention(coordinates, size)}, from "
                     "the top-left corner: x grows rightwards, y grows downwards (dy < 0 is a move up). Displacements, "
                     f"speeds and thresholds in px are pixels of the {w}x{h} frames the tracks are in.")
        for r in self.regions:
            if r.points == 0:
                continue
            when = f"frames {r.motion_frames[0]}-{r.motion_frames[1]}" if r.motion_frames else "no motion"
            lines.append(f"- region {r.name} {box(r.box)}: {r.points} points, {r.moving_points} moving, "
                         f"median net displacement {r.median_displacement_px:.1f} px (mean dx={r.mean_shift_px[0]:+.1f}, "
                         f"dy={r.mean_shift_px[1]:+.1f}), {when}, tracked {r.tracked_fraction:.0%}.")
        for c in self.comotion:
            lines.append(f"- co-motion {c.region_a} & {c.region_b}: together in {c.together_frames} frames "
                         f"({_spans(c.segments) or 'none'}), {c.share_of_a_motion:.0%} of {c.region_a}'s motion "
                         "(a contact hint, not proof).")
        for t in self.top_tracks[:5]:
            when = (f"moving frames {t.motion_frames[0]}-{t.motion_frames[1]}" if t.motion_frames
                    else "slow, no frame above the speed threshold and noise floor")
            lines.append(f"- track {t.index}: {point(t.start)} -> {point(t.end)}, "
                         f"{t.displacement_px:.1f} px, {when}.")
        return "\n".join(lines)


def _number(v: float, coordinates: Coordinates, fraction_digits: int) -> str:
    """A coordinate as written: fractions to ``fraction_digits`` places, thousandths and pixels whole."""
    return f"{v:.{fraction_digits}f}" if coordinates == "unit" else f"{v:.0f}"


def _convention(coordinates: Coordinates, size: tuple[int, int]) -> str:
    """How `MotionSummary.text` writes positions, in words (``size``: the shown image's width, height)."""
    if coordinates == "unit":
        return "fractions of the width and height (0..1; [0,0,1,1] is the whole frame)"
    if coordinates == "per_mille":
        return "thousandths of the width and height (0..1000; [0,0,1000,1000] is the whole frame)"
    return f"pixels of the {size[0]}x{size[1]} frames ([0,0,{size[0]},{size[1]}] is the whole frame)"


def _spans(spans: Sequence[tuple[int, int]]) -> str:
    return ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in spans)


def default_regions() -> dict[str, tuple[float, float, float, float]]:
    """The 3x3 grid of named regions used when the caller gives none."""
    return {GRID_NAMES[r * 3 + c]: (c / 3, r / 3, (c + 1) / 3, (r + 1) / 3) for r in range(3) for c in range(3)}


def region_box_problem(name: str, box: Sequence[float]) -> str | None:
    """Why ``box`` (region ``name``'s, numbers) is not a box ``summarize_tracks`` accepts, or None: four fractions
    of the frame (0..1) with x0 < x1 and y0 < y1 (module docstring). The tool service checks a request's regions
    with it before tracking, so only this rule of the summary is the request's fault (a 400)."""
    box = [float(v) for v in box]
    if len(box) != 4 or not all(0.0 <= v <= 1.0 for v in box) or box[0] >= box[2] or box[1] >= box[3]:
        return (f"region {name!r} {box}: boxes are [x0, y0, x1, y1] fractions of the frame (0..1, x0 < x1, "
                "y0 < y1), not pixels")
    return None


def summarize_tracks(tracks: MotionTracks, frame_size: tuple[int, int],
                     regions: Mapping[str, Sequence[float]] | None = None, *,
                     speed_threshold: float | None = None, net_threshold: float | None = None,
                     noise_floor: float = NOISE_FLOOR_PX, top_k: int = 8) -> MotionSummary:
    """Summarise tracks per region, per track and for co-motion of caller-given regions.
    ``speed_threshold`` is in pixels per clip frame, ``net_threshold`` and ``noise_floor`` in pixels
    (defaults: `default_thresholds`, `NOISE_FLOOR_PX`; a negative floor is a ValueError). More than
    ``MAX_REGIONS`` regions is a ValueError. Frames are taken in clip order (module docstring)."""
    if regions is not None and len(regions) > MAX_REGIONS:
        raise ValueError(f"{len(regions)} regions; the limit is {MAX_REGIONS} (MAX_REGIONS)")
    tracks = in_clip_order(tracks)
    h, w = int(frame_size[0]), int(frame_size[1])
    t_total, n = tracks.tracks.shape[:2]
    default_speed, default_net = default_thresholds((h, w))
    thr = float(speed_threshold if speed_threshold is not None else default_speed)
    net_thr = float(net_threshold if net_threshold is not None else default_net)
    labels = tracks.frame_indices
    floor = float(noise_floor)
    if not floor >= 0:
        raise ValueError(f"noise_floor must be a displacement >= 0 px, got {noise_floor!r}")
    step, moving = step_motion(tracks, thr, floor)
    # a step between frames t and t+1 is attributed to frame t+1 (where the new position is seen)
    step_labels = labels[1:]
    cols = np.arange(n)
    start = tracks.tracks[tracks.query_frames, cols] if n else np.zeros((0, 2), np.float32)
    first, last = _tracked_ends(tracks)
    net = last - first
    net_len = np.linalg.norm(net, axis=-1)
    moved = (moving.any(axis=0) if t_total > 1 else np.zeros(n, bool)) | (net_len > net_thr)

    given = regions is not None
    region_boxes = {k: tuple(float(v) for v in b) for k, b in (regions or default_regions()).items()}
    for name, box in region_boxes.items():  # pixels here made every box cover the whole frame, silently
        if (problem := region_box_problem(name, box)) is not None:
            raise ValueError(problem)
    members: dict[str, np.ndarray] = {}
    region_rows = []
    for name, (x0, y0, x1, y1) in region_boxes.items():
        inside = _in_span(start[:, 0], x0, x1, w) & _in_span(start[:, 1], y0, y1, h)
        members[name] = inside
        k = int(inside.sum())
        rmov = moving[:, inside].any(axis=1) if k and t_total > 1 else np.zeros(max(t_total - 1, 0), bool)
        when = np.flatnonzero(rmov)
        region_rows.append(RegionMotion(
            name=name[:64], box=(x0, y0, x1, y1), points=k, moving_points=int(moved[inside].sum()),
            tracked_fraction=float(tracks.visible[:, inside].mean()) if k else 0.0,
            median_displacement_px=float(np.median(net_len[inside])) if k else 0.0,
            mean_shift_px=_point(net[inside].mean(axis=0)) if k else (0.0, 0.0),
            motion_frames=[int(step_labels[when[0]]), int(step_labels[when[-1]])] if len(when) else []))

    comotion = []
    if given and t_total > 1:
        for a, b in itertools.combinations(region_boxes, 2):
            comotion.append(_comotion(a, b, step, moving, members[a], members[b], step_labels))

    # the moved tracks, farthest net displacement first: sorted on -net_len * moved, a track that moved and came
    # back (net 0) tied with the still ones before it and the list stopped at the first still one
    movers = np.flatnonzero(moved)
    order = movers[np.argsort(-net_len[movers], kind="stable")][: min(top_k, 16)]
    top = []
    for i in order:
        when = np.flatnonzero(moving[:, i])
        top.append(TrackMotion(index=int(i), start=_point(first[i]), end=_point(last[i]),
                               displacement_px=float(net_len[i]),
                               motion_frames=[int(step_labels[when[0]]), int(step_labels[when[-1]])]
                               if len(when) else []))
    any_motion = moving.any(axis=1) if t_total > 1 else np.zeros(0, bool)
    return MotionSummary(
        frames=t_total, points=n, frame_size=(h, w),
        tracked_fraction=float(tracks.visible.mean()) if n else 0.0, moving_points=int(moved.sum()),
        speed_threshold_px=thr, noise_floor_px=floor, net_threshold_px=net_thr,
        active_segments=segments(any_motion, step_labels)[:64],
        regions=region_rows, top_tracks=top, comotion=comotion)


def _in_span(v: np.ndarray, lo: float, hi: float, size: int) -> np.ndarray:
    """Pixel positions ``v`` (centres at integers) within the fractions ``[lo, hi)`` of a side of ``size``
    pixels, closed at ``hi == 1`` (module docstring)."""
    upper = v <= size - 0.5 if hi >= 1.0 else v < hi * size - 0.5
    return (v >= lo * size - 0.5) & upper


def _point(xy: np.ndarray) -> tuple[float, float]:
    """An ``(x, y)`` pair of a 2-vector, as floats."""
    return float(xy[0]), float(xy[1])


def _tracked_ends(tracks: MotionTracks) -> tuple[np.ndarray, np.ndarray]:
    """Positions ``[N,2]`` at the first and at the last frame where each point was tracked (its query
    position for a point never tracked)."""
    t_total, n = tracks.tracks.shape[:2]
    frames = np.arange(t_total)[:, None]
    first = np.where(tracks.visible, frames, t_total).min(axis=0)
    last = np.where(tracks.visible, frames, -1).max(axis=0)
    first = np.where(first >= t_total, tracks.query_frames, first)
    last = np.where(last < 0, tracks.query_frames, last)
    cols = np.arange(n)
    return tracks.tracks[first, cols], tracks.tracks[last, cols]


def _comotion(a: str, b: str, step: np.ndarray, moving: np.ndarray, in_a: np.ndarray, in_b: np.ndarray,
              labels: Sequence[int]) -> CoMotion:
    """Frames where the mean steps of the moving points of regions a and b agree in direction."""
    def mean_step(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mv = moving[:, mask]
        cnt = mv.sum(axis=1)
        s = (step[:, mask] * mv[..., None]).sum(axis=1) / np.maximum(cnt, 1)[:, None]
        return s, cnt > 0

    sa, ma = mean_step(in_a)
    sb, mb = mean_step(in_b)
    cos = (sa * sb).sum(-1) / np.maximum(np.linalg.norm(sa, axis=-1) * np.linalg.norm(sb, axis=-1), 1e-9)
    together = ma & mb & (cos > COMOTION_COSINE)
    return CoMotion(region_a=a[:64], region_b=b[:64], together_frames=int(together.sum()),
                    share_of_a_motion=float(together.sum() / ma.sum()) if ma.any() else 0.0,
                    segments=segments(together, labels)[:32])
