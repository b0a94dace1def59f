"""Frames already at CoTracker3's working shape.

`tools.motion.cotracker._model_video` resized every chunk of frames to the predictor's working shape with
``F.interpolate``, also when they already had that shape: a float32 copy of the chunk, then the resize's own
float32 output (bilinear with ``align_corners=True`` at the same size is the identity), then a third pass copying
it into the working video. Frames at the working shape are now converted from uint8 straight into the working
video. The working video, and so the tracks, must stay bit for bit what the resize gave.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from tools.motion import CoTracker3Tracker
from tools.motion import cotracker as cotracker_module
from tools.motion.base import fill_lost_positions, inside_image

torch = pytest.importorskip("torch")
F = pytest.importorskip("torch.nn.functional")


def _clip(t_total: int, h: int, w: int, *, read_only: bool, seed: int = 5) -> np.ndarray:
    frames = np.random.default_rng(seed).integers(0, 256, (t_total, h, w, 3), dtype=np.uint8)
    frames.flags.writeable = not read_only
    return frames


def _resized_video(frames: np.ndarray, shape: tuple[int, int]) -> torch.Tensor:
    """The working video as the chunked resize built it for every size: float32 frames through ``F.interpolate``."""
    x = torch.tensor(frames, dtype=torch.float32).permute(0, 3, 1, 2)
    return F.interpolate(x, size=shape, mode="bilinear", align_corners=True)[None]


@pytest.mark.parametrize("read_only", [False, True])
@pytest.mark.parametrize("chunk_frames", [1, 3, 100])  # 3 does not divide the 7 frames; 100 holds them all
def test_same_size_video_is_bitwise_the_resized_one(monkeypatch, read_only, chunk_frames):
    frames = _clip(7, 24, 36, read_only=read_only)
    monkeypatch.setattr(cotracker_module, "RESIZE_CHUNK_BYTES", chunk_frames * 24 * 36 * 3 * 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.inference_mode():
            got = cotracker_module._model_video(torch, frames, (24, 36), "cpu")
    assert [str(w.message) for w in caught] == []  # read-only frames: no "not writable" warning
    want = _resized_video(frames, (24, 36))
    assert got.dtype == torch.float32 and got.shape == want.shape == (1, 7, 3, 24, 36)
    assert torch.equal(got, want)
    assert got.stride() == want.stride()  # the channels-last layout the predictor's resize gives
    assert torch.equal(got, torch.tensor(frames, dtype=torch.float32).permute(0, 3, 1, 2)[None])


def test_same_size_video_needs_no_resize_nor_float_chunks(monkeypatch):
    """At the working shape the only float32 allocation is the working video itself: no chunk of float frames, no
    resize output (the profiler records every CPU allocation's size), and ``F.interpolate`` is not called."""
    from torch.profiler import ProfilerActivity, profile

    frames = _clip(9, 48, 64, read_only=True)
    frame_bytes = 48 * 64 * 3 * 4
    monkeypatch.setattr(cotracker_module, "RESIZE_CHUNK_BYTES", 3 * frame_bytes)
    calls: list[tuple] = []
    real = F.interpolate

    def counting(*args, **kwargs):
        calls.append(tuple(args[0].shape))
        return real(*args, **kwargs)

    monkeypatch.setattr(F, "interpolate", counting)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof, torch.inference_mode():
        video = cotracker_module._model_video(torch, frames, (48, 64), "cpu")
    sizes = sorted((e.self_cpu_memory_usage for e in prof.events() if e.self_cpu_memory_usage > 0), reverse=True)
    assert calls == []
    assert sizes[0] == video.numel() * 4 == 9 * frame_bytes
    assert all(s < frame_bytes for s in sizes[1:]), sizes  # nothing else of even one float frame's size
    monkeypatch.undo()
    with torch.inference_mode():
        cotracker_module._model_video(torch, frames, (24, 32), "cpu")  # another shape: resized as before
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof, torch.inference_mode():
        cotracker_module._model_video(torch, frames[:, :, :-1], (48, 64), "cpu")  # one column short: resized
    assert sum(e.self_cpu_memory_usage >= frame_bytes * 47 // 48 for e in prof.events()) > 1


class _Recorder:
    """A predictor of working shape ``shape`` that answers the queries it is given, visible, and keeps its video."""

    def __init__(self, shape: tuple[int, int]) -> None:
        self.interp_shape = shape

    def __call__(self, video, queries, backward_tracking):
        self.video = video.clone()
        t = video.shape[1]
        grey = video.mean(dim=2)  # [B,T,h,w]: tracks that depend on every working pixel
        drift = grey.mean(dim=(2, 3))[:, :, None, None] / 97
        tracks = queries[:, None, :, 1:].repeat(1, t, 1, 1) + drift
        return tracks, torch.ones(queries.shape[:2], dtype=torch.bool)[:, None].repeat(1, t, 1)


def test_same_size_tracks_are_those_of_the_resized_video():
    frames = _clip(6, 30, 40, read_only=True, seed=11)
    q = np.array([[0, 3, 4], [2, 39, 29], [5, 17.5, 0.25]], np.float32)
    rec = _Recorder((30, 40))
    got = CoTracker3Tracker(predictor=rec).track(frames, queries=q)
    want_video = _resized_video(frames, (30, 40))
    assert torch.equal(rec.video, want_video)
    with torch.inference_mode():
        tracks, visible = _Recorder((30, 40))(want_video, torch.tensor(q)[None], True)
    want_tracks, inside = inside_image(tracks[0].numpy(), 30, 40)
    np.testing.assert_array_equal(got.tracks, fill_lost_positions(want_tracks, q))
    np.testing.assert_array_equal(got.visible, visible[0].numpy() & inside)
