"""Points on the image's edge pixels: sub-pixel tracker jitter across the edge pixels' centres is not leaving
the image (a static point queried at x = 0 or W-1, as the agent's fractions 0 and 1 become, was lost at once)."""

from __future__ import annotations

import cv2
import numpy as np

from tools.motion import CoTracker3Tracker, LKTracker
from tools.motion.base import in_bounds, inside_image

H = W = 96


def still_noisy_clip(t_total: int = 16, sigma: float = 2.0, seed: int = 0) -> np.ndarray:
    """A smooth random texture that does not move, with fresh sensor noise in every frame."""
    rng = np.random.default_rng(seed)
    base = cv2.GaussianBlur(rng.integers(0, 255, (H, W, 3), dtype=np.uint8), (0, 0), 1.5).astype(float)
    return np.stack([np.clip(base + rng.normal(0, sigma, base.shape), 0, 255).astype(np.uint8)
                     for _ in range(t_total)])


EDGE_QUERIES = np.array([[0, 0, 0], [0, W - 1, H - 1], [0, W - 1, 48], [0, 48, H - 1], [0, 0, 48], [0, 48, 0]],
                        np.float32)


def test_inside_image_keeps_the_edge_pixels_and_clamps_onto_their_centres():
    pts = np.array([[-0.3, 5], [W - 0.8, 5], [5, H - 1 + 0.49], [-0.5, 5], [W - 0.5, 5], [5, -2], [np.nan, 5]],
                   np.float32)
    clamped, inside = inside_image(pts, H, W)
    assert inside.tolist() == [True, True, True, False, False, False, False]
    np.testing.assert_allclose(clamped[:3], [[0, 5], [W - 1, 5], [5, H - 1]])
    assert in_bounds(clamped[:3], H, W).all()
    np.testing.assert_array_equal(clamped[3:5], pts[3:5])  # points outside are left as they are


def test_lk_static_points_on_the_edges_stay_tracked():
    """The forward step of a still point at x = W-1 gave 127.02 or -0.03 (LK jitter of a few hundredths of a
    pixel), outside the strict [0, W-1] range: the point was lost for the rest of the clip (1 to 4 of 16 frames
    tracked), although it never left its edge pixel; the summary read it as untracked."""
    tr = LKTracker().track(still_noisy_clip(), queries=EDGE_QUERIES)
    assert tr.visible.all(), tr.visible.sum(axis=0).tolist()
    assert in_bounds(tr.tracks, H, W).all()  # positions stay in the query range
    assert np.abs(tr.tracks - EDGE_QUERIES[None, :, 1:]).max() < 0.5


def test_lk_point_that_leaves_the_frame_is_still_lost():
    rng = np.random.default_rng(1)
    patch = cv2.GaussianBlur(rng.integers(0, 255, (24, 24, 3), dtype=np.uint8), (0, 0), 1.0)
    frames = []
    for t in range(20):
        f = np.full((H, W, 3), 60, np.uint8)
        x = 60 + 4 * t
        if x < W:
            f[30:54, x:min(W, x + 24)] = patch[:, :min(24, W - x)]
        frames.append(f)
    tr = LKTracker().track(np.stack(frames), queries=np.array([[0, 70, 40]], np.float32))
    vis = tr.visible[:, 0]
    assert vis[:5].all() and not vis[-5:].any()
    assert in_bounds(tr.tracks[vis, 0], H, W).all()


class _EdgeJitterPredictor:
    """CoTracker3's output contract; every point jitters 0.2 px outward across the image edge at odd frames."""

    interp_shape = (H, W)  # the clip's size: its tracks are in the clip's pixels

    def __call__(self, video, queries, backward_tracking):
        import torch

        b, t = video.shape[:2]
        tracks = queries[:, None, :, 1:].repeat(1, t, 1, 1).clone()
        tracks[:, 1::2, 0, 0] -= 0.2  # point 0 at x = 0: to -0.2
        tracks[:, 1::2, 1, 0] += 0.2  # point 1 at x = W-1: to W-0.8
        tracks[:, 1::2, 2, 0] += 3.0  # point 2 at x = W-1: 3 px out, off the frame
        return tracks, torch.ones(b, t, queries.shape[1], dtype=torch.bool)


def test_cotracker_points_jittering_over_the_edge_pixels_stay_visible():
    frames = still_noisy_clip(t_total=6)
    q = np.array([[0, 0, 10], [0, W - 1, 20], [0, W - 1, 30]], np.float32)
    tr = CoTracker3Tracker(predictor=_EdgeJitterPredictor()).track(frames, queries=q)
    assert tr.visible[:, :2].all() and tr.visible[0::2, 2].all() and not tr.visible[1::2, 2].any()
    assert in_bounds(tr.tracks[:, :2], H, W).all()
    np.testing.assert_allclose(tr.tracks[:, :2], np.broadcast_to(q[None, :2, 1:], (6, 2, 2)))
