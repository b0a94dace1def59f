"""Raw elementary streams (``.h264``, ``.hevc``, ``.m4v``) carry no timestamps; their demuxer states a default
25 fps. The rate is the bitstream's own (H.264 / HEVC VUI timing, MPEG-4 part 2 VOL header)."""

from __future__ import annotations

from pathlib import Path

import av
import pytest

from tests.test_video import id_frames, read_ids
from tools.video import probe, read_frames


def _write_raw_stream(path: Path, fmt: str, codec: str, n: int, rate: int) -> Path:
    with av.open(str(path), "w", format=fmt) as c:
        s = c.add_stream(codec, rate=rate)
        s.width, s.height, s.pix_fmt = 64, 64, "yuv420p"
        for f in id_frames(n):
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
    return path


@pytest.mark.parametrize(("name", "fmt", "codec"), [("c.h264", "h264", "libx264"), ("c.m4v", "m4v", "mpeg4")])
def test_a_raw_stream_has_its_bitstreams_rate(tmp_path: Path, name: str, fmt: str, codec: str) -> None:
    """Was (H.264): 40 frames at 16 fps probed as 25 fps, 1.6 s: every frame label's time 36% early."""
    path = _write_raw_stream(tmp_path / name, fmt, codec, 40, 16)
    meta = probe(path)
    assert meta.frames == 40
    assert meta.fps == pytest.approx(16.0)
    assert meta.duration == pytest.approx(2.5)
    assert meta.label(32) == "frame 32 of 40, t=2.00s"
    assert read_ids(read_frames(path, [39, 0, 20])) == [39, 0, 20]
