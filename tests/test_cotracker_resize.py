"""CoTracker3's input: the wrapper resizes the frames to the predictor's working shape itself, a few frames at a
time, and hands it that video. It built the whole clip as full-size float32 (a 720p 93-frame stretch: ~1 GB) for
the predictor to resize. The predictor's own code (`cotracker.predictor.CoTrackerPredictor`) runs here with a
tiny stand-in for its network, so its resize, query scaling, backward tracking and scaling back are the real
ones, and the tracks must equal those of its own resize bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from tools.motion import CoTracker3Tracker
from tools.motion import cotracker as cotracker_module
from tools.motion.base import fill_lost_positions, grid_points, inside_image

torch = pytest.importorskip("torch")
predictor_module = pytest.importorskip("cotracker.predictor")


class _TinyModel(torch.nn.Module):
    """Stands in for CoTracker3's network with its call contract: each point moves by the brightness of the working
    video under it, times the frame index, plus a little of the frame's mean; its visibility is that brightness
    (the predictor thresholds it at 0.9). Any change of a working pixel changes the tracks."""

    def forward(self, video, queries, iters):
        b, t, _, ih, iw = video.shape
        grey = video.mean(dim=2)  # [B,T,ih,iw]
        x = queries[0, :, 1].round().long().clamp(0, iw - 1)
        y = queries[0, :, 2].round().long().clamp(0, ih - 1)
        under = grey[:, :, y, x] / 255  # [B,T,N]
        steps = torch.arange(t, dtype=video.dtype)[None, :, None]
        tracks = queries[:, None, :, 1:] + (under * steps)[..., None] + grey.mean(dim=(2, 3))[:, :, None, None] / 97
        return tracks, under, None


class _TinyPredictor(predictor_module.CoTrackerPredictor):
    """The real predictor's code around `_TinyModel` (its constructor would build the whole network)."""

    def __init__(self, interp_shape: tuple[int, int]) -> None:
        torch.nn.Module.__init__(self)
        self.v2 = False
        self.support_grid_size = 6
        self.interp_shape = interp_shape
        self.model = _TinyModel()


def _clip(t_total: int, h: int, w: int) -> np.ndarray:
    frames = np.random.default_rng(3).integers(0, 256, (t_total, h, w, 3), dtype=np.uint8)
    frames.flags.writeable = False  # as the agent and the tool service hand them
    return frames


def _tracks_of_the_predictors_resize(predictor, frames: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What `CoTracker3Tracker.track` gave before: the full-size float video to the predictor, which resized it."""
    h, w = frames.shape[1:3]
    with torch.inference_mode():
        video = torch.tensor(frames, dtype=torch.float32).permute(0, 3, 1, 2)[None]
        tracks, visible = predictor(video, queries=torch.tensor(q)[None], backward_tracking=True)
    out, inside = inside_image(tracks[0].numpy(), h, w)
    return fill_lost_positions(out, q), visible[0].numpy() & inside


@pytest.mark.parametrize("size", [(50, 70), (20, 30)])  # shrunk to the working shape, and enlarged to it
@pytest.mark.parametrize("chunk_frames", [1, 3, 100])  # 3 does not divide the 7 frames; 100 holds them all
def test_tracks_equal_those_of_the_predictors_own_resize(monkeypatch, size, chunk_frames):
    h, w = size
    frames = _clip(7, h, w)
    monkeypatch.setattr(cotracker_module, "RESIZE_CHUNK_BYTES", chunk_frames * h * w * 3 * 4)
    q = np.array([[0, 10, 12], [3, 17.3, 8.7], [6, w - 1, h - 1], [2, 0, 0], [5, 4.5, h - 2]], np.float32)
    predictor = _TinyPredictor((24, 36))
    got = CoTracker3Tracker(predictor=predictor).track(frames, queries=q)
    want_tracks, want_visible = _tracks_of_the_predictors_resize(predictor, frames, q)
    np.testing.assert_array_equal(got.tracks, want_tracks)
    np.testing.assert_array_equal(got.visible, want_visible)
    assert 0 < got.visible.sum() < got.visible.size  # the stand-in's visibility depends on the pixels
    grid = CoTracker3Tracker(predictor=predictor).track(frames, grid_size=3)
    want_tracks, want_visible = _tracks_of_the_predictors_resize(predictor, frames, np.concatenate(
        [np.zeros((9, 1), np.float32), grid_points(3, h, w)], axis=1))
    np.testing.assert_array_equal(grid.tracks, want_tracks)
    np.testing.assert_array_equal(grid.visible, want_visible)


class _ShapeKeeper:
    """A predictor of working shape 96x128 that keeps the shape of the video it is given."""

    interp_shape = (96, 128)

    def __call__(self, video, queries, backward_tracking):
        self.shape = tuple(video.shape)
        t = video.shape[1]
        return queries[:, None, :, 1:].repeat(1, t, 1, 1), torch.ones(queries.shape[:2], dtype=torch.bool)[:, None]\
            .repeat(1, t, 1)


def test_the_full_size_float_video_is_never_built():
    """16 frames of 720p are 177 MB as float32; the predictor resizes them to its working shape anyway. No tensor
    that large is allocated any more (the profiler records every CPU allocation's size), and the predictor is
    handed the video at its working shape."""
    from torch.profiler import ProfilerActivity, profile

    frames = _clip(16, 720, 1280)
    keeper = _ShapeKeeper()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        CoTracker3Tracker(predictor=keeper).track(frames, grid_size=2)
    assert keeper.shape == (1, 16, 3, 96, 128)
    largest = max(e.self_cpu_memory_usage for e in prof.events())
    full = frames.nbytes * 4
    assert 0 < largest < full / 4, (largest, full)  # the whole clip resized, and a few frames of it at full size
    assert largest <= cotracker_module.RESIZE_CHUNK_BYTES


@pytest.mark.slow
@pytest.mark.parametrize("size", [(50, 70), (64, 96)])  # resized, and already at the working shape (not resized)
def test_the_real_network_gives_the_tracks_of_the_predictors_own_resize(size):
    """The same with CoTracker3's own network (random weights): it sees the working video in the layout its
    predictor's resize gave (channels-last), and its tracks are those of that resize bit for bit."""
    torch.manual_seed(0)
    tracker = CoTracker3Tracker(allow_random_weights=True, interp_shape=(64, 96))
    frames = _clip(6, *size)
    q = np.array([[0, 10, 12], [3, 30.3, 20.7], [5, 69, 49]], np.float32)
    got = tracker.track(frames, queries=q)
    want_tracks, want_visible = _tracks_of_the_predictors_resize(tracker.predictor, frames, q)
    np.testing.assert_array_equal(got.tracks, want_tracks)
    np.testing.assert_array_equal(got.visible, want_visible)
