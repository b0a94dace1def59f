"""Quality pre-check: too few decodable frames, or spatially uniform content (DESIGN.md §3, quality node).

A frame is *flat* when its spatial standard deviation (largest over colour channels) is below ``max_spatial_std`` AND
its edge energy (mean Sobel gradient magnitude) is below ``max_edge_energy``, both times the frame's *dim scale*
(1 for a frame of mean grey level ``dim_brightness`` or brighter, ``brightness / dim_brightness`` below it, never
under ``dim_min_scale``: :func:`dim_scale`), or when it is *noise*: neighbouring
pixels are unrelated (their correlation, the mean of the horizontal and vertical lag-1 correlations of the grey
frame, is below ``min_neighbour_correlation``) AND the grey frame's power spectrum is white (its spectral
flatness, geometric over arithmetic mean of the power without DC, is above ``min_noise_flatness``). The clip is
*uniform* when at least ``uniform_frame_fraction`` of its frames are flat. A clip is usable when it
has at least ``min_frames`` decodable frames and is not uniform.

Decisions where the issue was silent: statistics are computed per colour channel on frames resized so the long
side is ``analysis_long_side`` (64) pixels, which keeps the check cheap and insensitive to codec
noise; a real scene has structure at 64 px. Pure pixel noise (a diverged generator's static) is
uniform too, and the reason says so: averaging it down to 64 px lowers its std and edge energy below the
flat thresholds only for large frames (1080p), so at the sizes generators write (832x480, 1280x720) it
passed as usable; the neighbour correlation tells it apart at any size (about 0 for noise, 0.7-0.9 for the
clip suite's scenes and textures, and a real image is smooth at 64 px). The correlation alone also called a
fine regular texture noise (a checker mat whose cells shrink to 1-2 px at 64 px aliases to a correlation
near 0 or below): such a frame's power sits in a few frequencies (flatness <= 0.09 for checkers of
every cell size at 256-1920 px, with or without objects), while static's is spread evenly (flatness
0.54-0.58, also after H.264 coding), hence the second condition; means and variances
are accumulated in float64. ``check_quality`` computes the statistics of the frames of a size together
(``clip_stats``: one resize per frame, then a few dozen numpy/OpenCV operations per chunk of 8 stacked small
frames, ``CHUNK_VALUES``);
``frame_stats`` computes one frame's (std and edge energy with OpenCV; correlation and flatness with the
clip pass's own functions on a batch of one) and is the reference the clip pass is tested against (equal to
~1e-8 relative). Per frame, the same statistics took ~15 small numpy/OpenCV calls, each a
point where the worker thread gives up the GIL and waits to take it back: with the agent's event loop
and a second worker busy, a 32-frame check of a tiny clip took 10-29 ms instead of 3, and the clip's
first model call waited for it (benchmarks/agent_concurrency.py).

Dim frames (decision): the std and edge cut-offs are grey levels, and a scene's contrast scales with its
exposure, so a structured clip filmed or generated dark was flat: the clip suite's scenes at 8% brightness
(mean grey ~10) have std ~5 and edge energy ~1.3, the checker mat scene 3.4 and 2.9, and such a clip was
zeroed before any model call, although it shows the task (a false zero; passing a near-black clip to the
model costs a call, and the model judges it, with a reason). What the cut-offs are there for does not scale
with exposure: a blank frame's faint gradient (a few grey levels: std up to 1.8 for 6 levels, edge energy
0.2-0.3) and light sensor noise (std 1-2 levels: edge energy up to 1.5) are the same grey levels at any
brightness. Hence the thresholds scale with the frame's mean grey level below ``dim_brightness`` (64, a
quarter of full scale) with a floor, ``dim_min_scale`` (0.4: std 2, edge energy 1.6), just above those blank
frames, whose stats tests/test_quality_dim.py measures at grey 0-250; at grey 64 and above nothing changed.
Alternatives rejected: contrast relative to the mean without a floor (std / mean) calls a near-black frame's
gradient or noise structure (a 6-level gradient at grey 5 has std / mean 0.36, the dimmed scene 0.5); stretching
each frame to its own range turns a faint gradient into a full one (std 73). What a floor cannot tell apart:
scenes whose contrast at that exposure is only a grey level or two, the same as a blank frame's gradient
(tests' textured and sparse fixtures and the clip suite's background_simplified below ~12%: std 0.8-1.6):
they stay flat, and at 25% (textured, sparse) or 12% (all clip-suite patterns) they pass. The brightness is
the mean of the analysed frame's three channel means, computed in the same pass as the std. The scale only
lowers the thresholds (never above the settings), so it can turn a zero into a model call, never a model
call into a zero; ``dim_brightness`` 0 restores the absolute cut-offs.

``check_video`` decodes with ``tools.video`` and turns an error of the clip's bytes (undecodable, cut, no frames)
into an unusable result with the error as reason (the graph decides whether that is a fault or a zero). A clip it
could not read (missing, not permitted, a disk error or memory the machine ran short of: ``VideoNotFoundError``) or
would decode past the reader's size limit raises its ``VideoError``: it was called an unusable clip, a verdict on the
clip's content for a fault of the machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np
from pydantic import BaseModel, Field


class QualityThresholds(BaseModel):
    """Thresholds of the quality pre-check (settings; defaults validated on the clip suite)."""

    min_frames: int = Field(default=2, ge=1, le=1000, description="fewest decodable frames for a usable clip")
    max_spatial_std: float = Field(default=5.0, ge=0, le=255,
                                   description="grey-level std below which a frame can be flat (scaled down "
                                               "for a dim frame: dim_brightness)")
    max_edge_energy: float = Field(default=4.0, ge=0, le=1000,
                                   description="mean Sobel magnitude below which a frame can be flat (scaled "
                                               "down for a dim frame: dim_brightness)")
    uniform_frame_fraction: float = Field(default=0.8, gt=0, le=1,
                                          description="share of flat frames that makes a clip uniform")
    analysis_long_side: int = Field(default=64, ge=8, le=1024, description="long side of the analysed frames")
    min_neighbour_correlation: float = Field(default=0.2, ge=-1, le=1,
                                             description="neighbouring pixels' correlation below which a frame is "
                                                         "noise without structure (with a white spectrum)")
    min_noise_flatness: float = Field(default=0.3, ge=0, le=1,
                                      description="spectral flatness above which a frame with unrelated "
                                                  "neighbouring pixels is noise (white spectrum)")
    dim_brightness: float = Field(default=64.0, ge=0, le=255,
                                  description="mean grey level (0-255) below which a frame is dim: its std and "
                                              "edge thresholds scale with its brightness (brightness / "
                                              "dim_brightness, at least dim_min_scale), so a scene filmed dark "
                                              "is not flat; 0 = absolute thresholds at every brightness")
    dim_min_scale: float = Field(default=0.4, gt=0, le=1,
                                 description="smallest share of max_spatial_std and max_edge_energy a dim frame "
                                             "keeps: a blank frame's faint gradient or light sensor noise (a few "
                                             "grey levels at any brightness) stays flat")


class QualityCheck(BaseModel):
    """Result of the quality pre-check."""

    usable: bool = Field(description="enough decodable frames and not uniform")
    uniform: bool = Field(description="most frames are spatially uniform")
    decodable_frames: int = Field(ge=0)
    reason: str | None = Field(default=None, max_length=500, description="why the clip is not usable")
    stats: dict[str, float] = Field(default_factory=dict, description="median std, median edge energy, flat share")


def neighbour_correlation(grey: np.ndarray) -> float:
    """Mean of the horizontal and vertical lag-1 Pearson correlations of a 2-D image; NaN when a shifted copy
    has no variance (a flat image) or the image is under 2 x 2 pixels."""
    if min(grey.shape) < 2:
        return float("nan")
    return float(_neighbour_correlations(np.asarray(grey, np.float64)[None])[0])


def spectral_flatness(grey: np.ndarray) -> float:
    """Geometric over arithmetic mean of a 2-D image's power spectrum without the DC term: about 0.56 for white
    noise, near 0 when the power sits in a few frequencies (a regular texture) or falls off with frequency (a
    natural image); NaN for a flat image (no power) or one under 2 x 2 pixels."""
    if min(grey.shape) < 2:
        return float("nan")
    return float(_flatness(np.asarray(grey, np.float64)[None])[0])


def _analysed(frame: np.ndarray, long_side: int) -> np.ndarray:
    """`frame` downscaled (INTER_AREA) so its long side is at most `long_side`."""
    h, w = frame.shape[:2]
    scale = long_side / max(h, w)
    if scale < 1:
        return cv2.resize(frame, (max(1, round(w * scale)), max(1, round(h * scale))), interpolation=cv2.INTER_AREA)
    return frame


def _row_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", a, b)


def _pair_correlations(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson correlation of a[t] and b[t] for each t ([T,...] float64; NaN where one has no variance)."""
    t = a.shape[0]
    a = a.reshape(t, -1)
    b = b.reshape(t, -1)
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    den = np.sqrt(_row_dot(a, a) * _row_dot(b, b))
    out = np.full(t, np.nan)
    np.divide(_row_dot(a, b), den, out=out, where=den > 0)
    return out


def _neighbour_correlations(grey: np.ndarray) -> np.ndarray:
    """:func:`neighbour_correlation` of each [h,w] image of `grey` [T,h,w] float64 (h, w >= 2)."""
    return (_pair_correlations(grey[:, :, :-1], grey[:, :, 1:]) + _pair_correlations(grey[:, :-1], grey[:, 1:])) / 2


def _flatness(grey: np.ndarray) -> np.ndarray:
    """:func:`spectral_flatness` of each [h,w] image of `grey` [T,h,w] float64 (h, w >= 2)."""
    t = grey.shape[0]
    power = (np.abs(np.fft.rfft2(grey - grey.mean(axis=(1, 2), keepdims=True))) ** 2).reshape(t, -1)[:, 1:]
    top = power.max(axis=1)
    power = power + 1e-12 * top[:, None]  # an exactly empty frequency makes the geometric mean 0, not -inf
    with np.errstate(divide="ignore", invalid="ignore"):
        flat = np.exp(np.log(power).mean(axis=1)) / power.mean(axis=1)
    return np.where(top > 0, flat, np.nan)


def stack_stats(small: np.ndarray, noise_correlation: float = 1.0) -> np.ndarray:
    """[T,5] float64: :func:`frame_stats` of each frame of `small` [T,h,w,3] uint8, frames already at the
    analysed size, computed for all frames at once (a few dozen array operations per clip instead of that many
    per frame). Sobel derivatives with cv2.Sobel (ksize 3, border reflected without repeating the edge pixel);
    means and variances accumulated in float64. :func:`clip_stats` calls it on chunks of about
    ``CHUNK_VALUES`` values."""
    t, h, w, _ = small.shape
    n = h * w
    g = np.ascontiguousarray(small.transpose(0, 3, 1, 2), dtype=np.float32)  # [T,3,h,w]: rows of one channel
    rows = g.reshape(t * 3, n).astype(np.float64)
    means = rows.mean(axis=1, keepdims=True)
    brightness = means.reshape(t, 3).mean(axis=1)
    rows -= means
    std = np.sqrt(_row_dot(rows, rows) / n).reshape(t, 3).max(axis=1)
    # every channel image with its own reflected border (cv2's default, BORDER_REFLECT_101), stacked into one
    # tall image: a 3x3 Sobel never reaches past a border row into the next image
    pad = np.pad(g, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="reflect").reshape(t * 3 * (h + 2), w + 2)
    mag = cv2.magnitude(cv2.Sobel(pad, cv2.CV_32F, 1, 0, ksize=3), cv2.Sobel(pad, cv2.CV_32F, 0, 1, ksize=3))
    mag = mag.reshape(t * 3, h + 2, w + 2)[:, 1:-1, 1:-1]
    edge = mag.reshape(t * 3, n).mean(axis=1, dtype=np.float64).reshape(t, 3).max(axis=1) / 4.0
    corr = np.full(t, np.nan)
    flatness = np.full(t, np.nan)
    if min(h, w) >= 2:
        grey = (g[:, 0].astype(np.float64) + g[:, 1] + g[:, 2]) / 3
        corr = _neighbour_correlations(grey)
        noisy = np.flatnonzero(corr < noise_correlation)  # NaN compares False: a flat frame is never noise
        if len(noisy):
            flatness[noisy] = _flatness(grey[noisy])
    return np.stack([std, edge, corr, flatness, brightness], axis=1)


def frame_stats(frame: np.ndarray, long_side: int = 64,
                noise_correlation: float = 1.0) -> tuple[float, float, float, float, float]:
    """(spatial std, edge energy, neighbour correlation, spectral flatness, brightness) of one RGB uint8 frame
    after downscaling to ``long_side``; the flatness only when the correlation is below ``noise_correlation``
    (the frames it can decide; NaN for the others). The brightness is the frame's mean grey level (the mean
    of the three channel means).

    Std and edge energy are the largest over the three colour channels (so a red block on a grey table of the
    same brightness still counts), edge energy being the mean Sobel gradient magnitude / 4; the neighbour
    correlation is :func:`neighbour_correlation` and the flatness :func:`spectral_flatness` of the grey frame
    (the mean of the three channels). :func:`check_quality` computes the same for a whole clip at once
    (:func:`stack_stats`).
    """
    g = np.ascontiguousarray(_analysed(frame, long_side), dtype=np.float32)
    gx = cv2.Sobel(g, cv2.CV_32F, 1, 0, ksize=3)
    gy = cv2.Sobel(g, cv2.CV_32F, 0, 1, ksize=3)
    mean, std = cv2.meanStdDev(g)  # per channel, population std (ddof 0), accumulated in float64
    edge = cv2.mean(cv2.magnitude(gx.reshape(-1, 3), gy.reshape(-1, 3)).reshape(g.shape))[:3]
    grey = g.mean(axis=2, dtype=np.float64)
    corr = neighbour_correlation(grey)
    flatness = spectral_flatness(grey) if corr < noise_correlation else float("nan")
    return float(std.max()), float(max(edge)) / 4.0, corr, flatness, float(mean.mean())


CHUNK_VALUES = 2**17
"""Values (frames x pixels x 3) :func:`clip_stats` hands :func:`stack_stats` at once: 8 frames at 64 x 64. A
whole 32-frame clip at once took 13 ms in a worker thread, in 8-frame chunks 3.8 ms (float64 temporaries of a
few MB, newly mapped and faulted in by every call, against ones that fit the cache and the allocator's free
lists)."""


def clip_stats(frames: Sequence[np.ndarray], long_side: int = 64, noise_correlation: float = 1.0) -> np.ndarray:
    """[T,5] float64: :func:`frame_stats` of each frame (RGB uint8 [H,W,3]), frames of one size at a time
    through :func:`stack_stats`, in chunks of about ``CHUNK_VALUES`` values."""
    small = [_analysed(f, long_side) for f in frames]
    out = np.empty((len(small), 5))
    by_shape: dict[tuple[int, ...], list[int]] = {}
    for i, s in enumerate(small):
        by_shape.setdefault(s.shape, []).append(i)
    for shape, idx in by_shape.items():
        step = max(1, CHUNK_VALUES // int(np.prod(shape)))
        for k in range(0, len(idx), step):
            part = idx[k:k + step]
            out[part] = stack_stats(np.stack([small[i] for i in part]), noise_correlation)
    return out


def dim_scale(brightness: np.ndarray, th: QualityThresholds) -> np.ndarray:
    """Factor on ``max_spatial_std`` and ``max_edge_energy`` for frames of mean grey level `brightness`: 1 from
    ``dim_brightness`` up (and everywhere when it is 0), ``brightness / dim_brightness`` below it, never under
    ``dim_min_scale``. A scene's contrast scales with its exposure; a blank frame's gradient or sensor noise
    (a few grey levels) does not, hence the floor."""
    if th.dim_brightness <= 0:
        return np.ones_like(brightness)
    return np.clip(brightness / th.dim_brightness, th.dim_min_scale, 1.0)


def check_quality(frames: np.ndarray | Sequence[np.ndarray], *,
                  thresholds: QualityThresholds | None = None) -> QualityCheck:
    """Quality pre-check of decoded frames: an array ``[T,H,W,3]`` uint8 (T may be 0) or a sequence of
    ``[H,W,3]`` uint8 frames (checked one by one, never stacked into a copy)."""
    th = thresholds or QualityThresholds()
    if isinstance(frames, np.ndarray):
        if frames.ndim != 4:  # a grey [T,H,W] clip read as "no decodable frames"
            raise ValueError(f"frames must be uint8 [T,H,W,3] (or [H,W,3] each), got {frames.dtype} {frames.shape}")
        items = list(frames)  # views of the array, no copies
    else:
        items = [np.asarray(f) for f in frames]
    if not items or items[0].size == 0:
        return QualityCheck(usable=False, uniform=False, decodable_frames=0,
                            reason="no decodable frames", stats={})
    for f in items:
        if f.ndim != 3 or f.shape[-1] != 3 or f.dtype != np.uint8:
            raise ValueError(f"frames must be uint8 [T,H,W,3] (or [H,W,3] each), got {f.dtype} {f.shape}")
    n = len(items)
    stats = clip_stats(items, th.analysis_long_side, th.min_neighbour_correlation).astype(np.float32)
    # NaN (a flat frame) is never noise: the std test decides
    noise = (stats[:, 2] < th.min_neighbour_correlation) & (stats[:, 3] > th.min_noise_flatness)
    scale = dim_scale(stats[:, 4], th)
    flat = ((stats[:, 0] < th.max_spatial_std * scale) & (stats[:, 1] < th.max_edge_energy * scale)) | noise
    flat_share = float(flat.mean())
    uniform = flat_share >= th.uniform_frame_fraction
    correlations = stats[:, 2][np.isfinite(stats[:, 2])]
    summary = {"median_spatial_std": float(np.median(stats[:, 0])),
               "median_edge_energy": float(np.median(stats[:, 1])), "flat_frame_fraction": flat_share,
               "median_brightness": float(np.median(stats[:, 4]))}
    if len(correlations):  # none when every frame is one colour (JSON has no NaN)
        summary["median_neighbour_correlation"] = float(np.median(correlations))
    reasons = []
    if n < th.min_frames:
        reasons.append(f"only {n} decodable frame(s), need at least {th.min_frames}")
    if uniform:
        reasons.append(f"spatially uniform content: {flat_share:.0%} of frames are flat at "
                       f"{th.analysis_long_side} px (std < {th.max_spatial_std}, edge energy < "
                       f"{th.max_edge_energy}, both scaled down to as little as {th.dim_min_scale:g}x for frames "
                       f"darker than grey {th.dim_brightness:g}, or neighbouring pixels unrelated: correlation < "
                       f"{th.min_neighbour_correlation}, white spectrum): one colour, or only pixel-level noise")
    return QualityCheck(usable=not reasons, uniform=uniform, decodable_frames=n,
                        reason="; ".join(reasons) or None, stats=summary)


def check_video(src: str | Path, *, thresholds: QualityThresholds | None = None,
                max_frames: int | None = None) -> QualityCheck:
    """Decode ``src`` with ``tools.video`` and run :func:`check_quality`. A clip whose bytes fail to decode (not a
    video, cut or corrupt: a ``VideoDecodeError``) or hold no frames (``EmptyVideoError``) gives an unusable result;
    every other ``VideoError`` (``VideoNotFoundError``: not there, not permitted, a read the machine failed; a decode
    past the reader's size limit) raises: it says nothing of the clip's content (module docstring)."""
    from tools.video import EmptyVideoError, VideoDecodeError, read_all_frames

    try:
        frames = read_all_frames(src, max_frames=max_frames)
    except (VideoDecodeError, EmptyVideoError) as exc:
        return QualityCheck(usable=False, uniform=False, decodable_frames=0,
                            reason=f"undecodable video: {type(exc).__name__}: {exc}"[:500])
    return check_quality(frames, thresholds=thresholds)
