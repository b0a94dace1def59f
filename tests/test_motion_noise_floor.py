"""Motion summaries on small, noisy frames: LK's own jitter must not read as motion (tools/motion/summary.py,
"noise floor"). At 128x128 the speed threshold is 0.18 px/frame, below the tracker's per-step jitter on a
still scene with sensor noise (sigma 3-5 grey levels: steps up to ~1.4 px), and 62-64 of 64 grid points
of a still clip were reported as moved."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from tools.motion import CoTracker3Tracker, LKTracker, MotionTracks, summarize_tracks
from tools.motion.grid import track_window_grid


def noisy_clip(size: int, sigma: float, *, square_speed: float | None = None, frames: int = 32,
               seed: int = 0) -> np.ndarray:
    """RGB ``[frames, size, size, 3]``: a still smooth texture with fresh Gaussian sensor noise (``sigma`` grey
    levels) in every frame; with ``square_speed``, a textured square (a quarter of the side) moving right by
    that many px per frame."""
    rng = np.random.default_rng(seed)
    bg = cv2.GaussianBlur((rng.random((size, size)) * 255).astype(np.float32), (0, 0), 2.0)
    side = size // 4
    square = cv2.GaussianBlur((rng.random((side, side)) * 255).astype(np.float32), (0, 0), 1.5) * 0.6 + 90
    out = []
    for t in range(frames):
        img = bg.copy()
        if square_speed is not None:
            x = size // 8 + int(round(square_speed * t))
            img[size * 3 // 8:size * 3 // 8 + side, x:x + side] = square
        out.append(np.clip(img + rng.normal(0, sigma, img.shape), 0, 255).astype(np.uint8))
    return np.repeat(np.stack(out)[..., None], 3, axis=-1)


@pytest.mark.parametrize("size", [128, 256])
@pytest.mark.parametrize("sigma", [3.0, 5.0])
def test_a_still_noisy_clip_reports_no_motion(size, sigma):
    """The agent's grid (8x8 on the first, middle and last frame) on a still scene: 63/64 points 'moved' at
    128 (sigma 3) and 63/64 at 256 (sigma 5) before the noise floor."""
    tracks = track_window_grid(LKTracker(), noisy_clip(size, sigma), 8)
    s = summarize_tracks(tracks, (size, size))
    assert tracks.visible.mean() > 0.9  # the scene is tracked: the verdict is about its jitter
    assert s.moving_points == 0 and s.active_segments == [], s.text()
    assert all(r.motion_frames == [] for r in s.regions)


@pytest.mark.parametrize("size", [128, 256])
@pytest.mark.parametrize("speed", [1.0, 3.0])
def test_a_moving_square_in_noise_is_still_reported_as_moved(size, speed):
    """The control: a square moving 1 or 3 px per frame through the same noise moves, its points are the
    ones that moved, and the frames it moves in are named (1 px/frame steps are below the 2 px floor one by
    one; over the five-step window they are not)."""
    frames = noisy_clip(size, 3.0, square_speed=speed, frames=24)
    tracks = track_window_grid(LKTracker(), frames, 8)
    s = summarize_tracks(tracks, (size, size))
    assert s.moving_points >= 2, s.text()
    lo, hi = size * 3 // 8, size * 3 // 8 + size // 4  # the square's rows
    starts = np.array([t.start for t in s.top_tracks])
    assert ((starts[:, 1] >= lo - 1) & (starts[:, 1] <= hi)).all(), s.text()  # motion on the square only
    assert s.active_segments and s.active_segments[0][1] - s.active_segments[0][0] >= 10, s.text()
    assert any(t.motion_frames for t in s.top_tracks), s.text()


def _line(t_total: int, xs: np.ndarray) -> MotionTracks:
    tracks = np.stack([xs, np.full_like(xs, 64.0)], -1)[:, None].astype(np.float32)
    return MotionTracks(tracks=tracks, visible=np.ones((t_total, 1), bool), query_frames=np.zeros(1, int))


def test_one_jittered_position_is_not_motion_but_a_short_twitch_is():
    """A single position 1.4 px off (a noisy match: two steps of 1.4 px, far above 0.18 px/frame) is not
    motion; a 3 px step that stays is, at the frame it happens (shorter than the 3.6 px net threshold)."""
    xs = np.full(32, 50.0)
    xs[10] += 1.4
    s = summarize_tracks(_line(32, xs), (128, 128))
    assert s.moving_points == 0 and s.active_segments == []
    xs = np.full(32, 50.0)
    xs[10:] += 3.0
    s = summarize_tracks(_line(32, xs), (128, 128))
    assert s.moving_points == 1 and s.active_segments == [(10, 10)]
    assert "over more than 2.5 px" in s.text() and s.noise_floor_px == 2.5
    assert summarize_tracks(_line(32, xs), (128, 128), noise_floor=4.0).moving_points == 0
    with pytest.raises(ValueError, match="noise_floor must be a displacement >= 0 px"):
        summarize_tracks(_line(32, xs), (128, 128), noise_floor=-1.0)


class _JitterPredictor:
    """CoTrackerPredictor's output contract; every point at its query position plus seeded jitter (sigma
    ``jitter`` px), drifting right by ``speed`` px per frame."""

    interp_shape = (128, 128)  # the clip's size: its jitter is in the clip's pixels

    def __init__(self, jitter: float, speed: float = 0.0) -> None:
        self.jitter, self.speed = jitter, speed

    def __call__(self, video, queries, backward_tracking):
        import torch

        b, t = video.shape[:2]
        n = queries.shape[1]
        g = torch.Generator().manual_seed(0)
        tracks = queries[:, None, :, 1:].repeat(1, t, 1, 1).clone()
        tracks[..., 0] += self.speed * torch.arange(t, dtype=tracks.dtype)[None, :, None]
        tracks += torch.randn(tracks.shape, generator=g) * self.jitter
        return tracks, torch.ones(b, t, n, dtype=torch.bool)


def test_cotracker_tracks_follow_the_same_rule():
    """CoTracker3's tracks go through the same summary: jitter of 0.3 px is no motion at 128x128 (every point
    moved before), and 1 px/frame drift is motion in every frame."""
    pytest.importorskip("torch")
    frames = noisy_clip(128, 3.0, frames=24)
    still = summarize_tracks(CoTracker3Tracker(predictor=_JitterPredictor(0.3)).track(frames, grid_size=4),
                             (128, 128))
    assert still.moving_points == 0 and still.active_segments == [], still.text()
    moving = summarize_tracks(CoTracker3Tracker(predictor=_JitterPredictor(0.3, 1.0)).track(frames, grid_size=4),
                              (128, 128))
    assert moving.moving_points == 16 and moving.active_segments == [(1, 23)], moving.text()
