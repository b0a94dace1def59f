"""LK on long windows: chained steps must not drift (tools/motion/lk.py, "Drift")."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from tools.motion import LKTracker

H = W = 128


def to_rgb(gray_frames: list[np.ndarray]) -> np.ndarray:
    return np.repeat(np.stack(gray_frames)[..., None], 3, axis=-1)


def _noisy_texture_clip(t_total: int, velocity: tuple[float, float], sigma: float, seed: int = 0) -> np.ndarray:
    """A smooth random texture translating by ``velocity`` px per frame, with fresh sensor noise (``sigma`` grey
    levels) in every frame."""
    rng = np.random.default_rng(seed)
    tex = cv2.GaussianBlur((rng.random((H, W)) * 255).astype(np.float32), (0, 0), 2.0)
    frames = []
    for t in range(t_total):
        m = np.float32([[1, 0, velocity[0] * t], [0, 1, velocity[1] * t]])
        img = cv2.warpAffine(tex, m, (W, H), borderMode=cv2.BORDER_REFLECT) + rng.normal(0, sigma, (H, W))
        frames.append(np.clip(img, 0, 255).astype(np.uint8))
    return to_rgb(frames)


@pytest.mark.parametrize(("t_total", "velocity", "sigma", "max_error"),
                         [(120, (0.0, 0.0), 6.0, 2.0), (160, (0.3, 0.2), 3.0, 1.0)])
def test_lk_does_not_drift_over_a_long_window(t_total, velocity, sigma, max_error):
    """Frame-to-frame LK adds each step's small error to the next: over 120 noisy frames a point on a static
    scene wandered 4.5 px while reported tracked (a net displacement that reads as motion), 1.4 px on average
    over the last 20 frames. Each step is now matched against the query frame too: the error stays at the
    level of one match (noise), however long the window. Positions within 12 px of the border (LK's window
    reaches past it there) are left out."""
    frames = _noisy_texture_clip(t_total, velocity, sigma)
    end = t_total - 1
    queries = np.array([[0, x, y] for x in (40, 64, 88) for y in (40, 64, 88)]
                       + [[end, 64 + velocity[0] * end, 50 + velocity[1] * end]], float)  # tracked backwards
    tr = LKTracker().track(frames, queries=queries)
    t = np.arange(t_total)[:, None, None]
    truth = queries[None, :, 1:] + (t - queries[None, :, :1]) * np.array(velocity)[None, None]
    err = np.linalg.norm(tr.tracks - truth, axis=-1)
    inner = ((truth >= 12) & (truth <= W - 13)).all(axis=-1) & tr.visible
    assert tr.visible.mean() > 0.9
    assert err[inner].max() < max_error, err[inner].max()
    assert err[-20:][inner[-20:]].mean() < 0.5, err[-20:][inner[-20:]].mean()


def test_anchor_every_must_be_a_positive_number_of_steps():
    from tools.motion.lk import LKConfig

    for bad in (0, -1, 2.5):
        with pytest.raises(ValueError, match="anchor_every must be a positive integer"):
            LKTracker(LKConfig(anchor_every=bad))
