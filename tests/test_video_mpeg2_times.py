"""MPEG-1 / MPEG-2 video without B-frames keeps its timestamps (`tools.mpeg_pictures`)."""

from __future__ import annotations

from pathlib import Path

import av
import pytest

from tests.test_video import id_frames, read_ids
from tools.video import VideoReader, probe


def _write(path: Path, fmt: str | None, n: int, max_b: int, rate: int = 16) -> Path:
    with av.open(str(path), "w", format=fmt) as c:
        s = c.add_stream("mpeg2video", rate=rate)
        s.width, s.height, s.pix_fmt = 64, 64, "yuv420p"
        s.options = {"qscale": "2"}
        s.codec_context.gop_size, s.codec_context.max_b_frames = 8, max_b
        for f in id_frames(n):
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
    return path


@pytest.mark.parametrize(("name", "fmt"), [("c.ts", "mpegts"), ("c.mpg", "mpeg"), ("c.mkv", None)])
@pytest.mark.parametrize("n", [2, 40])
def test_mpeg2_without_b_frames_has_frame_times_and_seeks(tmp_path, name, fmt, n):
    """The MPEG-2 decoder holds one frame back unless the stream says low delay, so a clip without B-frames (whose
    timestamps never reorder) was taken for an AVI's decode-order timestamps: no frame times, no seeking (every read
    decoded from the start), and a 2-frame MPEG-TS clip at 16 fps read as 32 fps (FFmpeg's guess), 0.094 s long,
    its frames labelled at half their times."""
    path = _write(tmp_path / name, fmt, n, max_b=0)
    meta = probe(path)
    assert meta.frames == n and meta.fps == pytest.approx(16)
    assert meta.times is not None and meta.times[1] == pytest.approx(1 / 16, abs=1e-3)  # Matroska: milliseconds
    assert meta.duration == pytest.approx(n / 16, abs=2e-3)
    with VideoReader(path) as reader:
        assert reader._order[1] is not None  # frames found by their timestamps: the reader may seek
        idx = [n - 1, 0] if n == 2 else [37, 3, 20, 39]
        assert read_ids(reader.read(idx)) == idx
        assert read_ids(reader.read(range(n))) == list(range(n))


@pytest.mark.parametrize("name", ["b.avi", "b.ts"])
def test_mpeg2_with_b_frames_reads_the_frames_it_names(tmp_path, name):
    """With B-frames (pictures the scan now reads the type of) every read still returns the frames it names."""
    path = _write(tmp_path / name, "mpegts" if name.endswith(".ts") else None, 24, max_b=2)
    with VideoReader(path) as reader:
        assert read_ids(reader.read([5, 17, 23])) == [5, 17, 23]
        assert read_ids(reader.read(range(24))) == list(range(24))
