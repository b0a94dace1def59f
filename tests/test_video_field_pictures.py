"""A raw H.264 stream (no timestamps) coded as field pictures (PAFF, as 1080i broadcast H.264 is): FFmpeg's parser
gives each field its own packet and the decoder one frame for the two. The reader counts the decoder's output there.
Since the count check (tools.video_decode.CountCheck) every read fails: the second field's packet gives no frame of
its own, so the check takes it for a frame the decoder dropped (FrameDropped: "dropped the frame of packet 1"), where
before frame 0..19 read as they should. The scan counts packets as frames (40 for 20), a clip twice its length whose
frames past the middle could never be read. Not fixed (TODO): the scan and the count check must know a field pair
is one frame (field_pic_flag in the slice header, read with the SPS)."""

from __future__ import annotations

from pathlib import Path

import av
import pytest

from tests.h264_fields import field_coded
from tools.video import VideoReader, probe

N = 20


def _clip(tmp_path: Path) -> Path:
    path = tmp_path / "fields.h264"
    path.write_bytes(field_coded(N))
    return path


def test_the_premise_two_packets_one_frame(tmp_path: Path) -> None:
    with av.open(str(_clip(tmp_path))) as c:
        packets = [p for p in c.demux(c.streams.video[0]) if p.size]
        frames = [f for p in packets for f in p.decode()] + list(c.streams.video[0].decode(None))
    assert len(packets) == 2 * N and len(frames) == N and all(p.pts is None for p in packets)
    assert frames[0].interlaced_frame and frames[0].height == 64


@pytest.mark.xfail(strict=True, reason="FrameDropped for a field pair's second packet (commit 6c49716); not fixed")
def test_frames_of_a_field_coded_stream_read_as_themselves(tmp_path: Path) -> None:
    path = _clip(tmp_path)
    with av.open(str(path)) as c:
        want = [f.to_ndarray(format="rgb24").mean() for f in c.decode(video=0)]
    r = VideoReader(path)
    got = r.read([0, 5, N - 1]).mean(axis=(1, 2, 3))
    assert [round(float(g)) for g in got] == [round(float(want[i])) for i in (0, 5, N - 1)]


@pytest.mark.xfail(strict=True, reason="the scan counts a field pair's two packets as two frames; not fixed")
def test_a_field_coded_stream_counts_its_frames(tmp_path: Path) -> None:
    assert probe(_clip(tmp_path)).frames == N
