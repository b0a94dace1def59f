"""A read settles the frames it handed out (every frame decoded before one of them comes out) by flushing the decoder
(end of stream, then a reset for the next seek), or with frame threads by decoding on. The same clip read many ways
in one reader, in sequence and from several threads at once (single frames, the first frames, the last frames, sets
across keyframes), gives each frame byte for byte as a full PyAV decode does: H.264 with B-frames (slice and frame
threads), HEVC, MPEG-4 part 2 in AVI, raw H.264 without timestamps."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import av
import numpy as np
import pytest

from tests.test_video import id_frames
from tools import video_scan
from tools.video import VideoReader

N = 24
CLIPS = {  # name: (codec, file name, muxer, codec options)
    "h264": ("libx264", "a.mp4", None, {"x264-params": "keyint=8:bframes=3:log-level=error"}),
    "hevc": ("libx265", "h.mp4", None, {"x265-params": "keyint=8:bframes=3:log-level=error"}),
    "mpeg4": ("mpeg4", "m.avi", None, {"bf": "2", "g": "8"}),
    "raw": ("libx264", "r.h264", "h264", {"x264-params": "keyint=8:bframes=3:log-level=error"}),
}


def _write(path: Path, codec: str, fmt: str | None, options: dict) -> Path:
    with av.open(str(path), "w", format=fmt) as c:
        s = c.add_stream(codec, rate=16)
        s.width, s.height, s.pix_fmt, s.options = 64, 64, "yuv420p", options
        for f in id_frames(N):
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
    return path


def _full_decode(path: Path) -> np.ndarray:
    """Every frame in presentation order (output order without timestamps), as RGB."""
    with av.open(str(path)) as c:
        frames = [(f.pts, n, f.to_ndarray(format="rgb24")) for n, f in enumerate(c.decode(video=0))]
    return np.stack([f for *_, f in sorted(frames, key=lambda t: (t[0] is None, t[0] or 0, t[1]))])


def _reads() -> list[list[int]]:
    rng = random.Random(0)
    return ([[i] for i in range(N)] + [list(range(k)) for k in (1, 3, 8, 9, 17)]
            + [list(range(k, N)) for k in (N - 1, N - 3, 15, 8)]
            + [sorted(rng.sample(range(N), rng.randint(2, 6))) for _ in range(12)] + [list(range(N))])


@pytest.mark.parametrize("threads", ["slice", "frame"])
@pytest.mark.parametrize("name", sorted(CLIPS))
def test_reads_in_sequence_and_at_once_give_the_full_decode(tmp_path, monkeypatch, name, threads):
    codec, file, fmt, options = CLIPS[name]
    path = _write(tmp_path / file, codec, fmt, options)
    want = _full_decode(path)
    assert len(want) == N  # the premise
    monkeypatch.setattr(video_scan, "frame_threads", lambda *_: threads == "frame")
    reads = _reads()
    with VideoReader(path) as reader:
        for wanted in reads:
            assert np.array_equal(reader.read(wanted), want[wanted]), (name, wanted)
    with VideoReader(path) as reader, ThreadPoolExecutor(4) as pool:  # (the first read takes the scan's demuxer)
        for wanted, got in zip(reads, pool.map(reader.read, reads), strict=True):
            assert np.array_equal(got, want[wanted]), (name, wanted)
