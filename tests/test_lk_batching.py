"""LK's batching must not change numbers (tools/motion/lk.py): points are tracked sorted by query frame, so
queries in any order, on many frames, must give the plain step-by-step algorithm's tracks, bit for bit, in the
order they were asked; grey frames are converted in runs of frames, which must equal frame by frame."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

import tools.motion.lk as lk
from tests.test_motion import H, W, _reference_lk, moving_square
from tools.motion import LKTracker
from tools.motion.lk import LKConfig


@pytest.mark.parametrize("anchor_every", [1, 3, 4])
def test_lk_unsorted_queries_on_many_frames_match_the_step_by_step_algorithm(anchor_every):
    """Query frames interleaved and unsorted (groups start at different steps in both directions, several
    groups are matched against their query frames at the same step), with occlusion, texture loss and noise
    so that forward tests, checks and matches all reject some points."""
    rng = np.random.default_rng(11)
    frames = moving_square(t_total=22, vx=4, vy=2, x0=30, y0=25).copy()
    frames[10:, 70:110, 10:50] = 200  # a flat block appears: points under it lose texture
    frames[::4] = np.clip(frames[::4].astype(int) + rng.integers(-40, 40, frames[::4].shape), 0, 255)
    qf = rng.permutation([0, 0, 2, 5, 5, 8, 11, 11, 11, 14, 17, 21, 21, 6, 2] * 3)
    queries = np.column_stack([qf, rng.uniform(0, W - 1, len(qf)), rng.uniform(0, H - 1, len(qf))])
    queries[:4, 1:] = [[35, 30], [40, 33], [45, 36], [50, 40]]  # on the square at their query frames
    tracker = LKTracker(LKConfig(anchor_every=anchor_every))
    got = tracker.track(frames, queries=queries)
    want_tracks, want_visible = _reference_lk(tracker, frames, queries)
    assert 0 < got.visible.mean() < 1
    np.testing.assert_array_equal(got.query_frames, qf)
    np.testing.assert_array_equal(got.tracks[qf, np.arange(len(qf))], queries[:, 1:].astype(np.float32))
    np.testing.assert_array_equal(got.visible, want_visible)
    np.testing.assert_array_equal(got.tracks, want_tracks)


@pytest.mark.parametrize("run_frames", [1, 3, 7, 100])
def test_grey_frames_converted_in_runs_equal_frame_by_frame(monkeypatch, run_frames):
    """Runs of 1, 3 (7 frames: a short last run), 7 and more than the clip."""
    frames = np.random.default_rng(3).integers(0, 256, (7, 24, 30, 3), np.uint8)
    monkeypatch.setattr(lk, "_GRAY_RUN_PIXELS", run_frames * 24 * 30)
    grays = lk._grays(frames)
    assert len(grays) == 7
    for g, f in zip(grays, frames, strict=True):
        np.testing.assert_array_equal(g, cv2.cvtColor(f, cv2.COLOR_RGB2GRAY))
