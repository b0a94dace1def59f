"""Decoder threading (tools.video_slices): slice counts parsed from H.264 / HEVC packets by hand-built
byte strings and real encodes, the threading rule, and the scan passing the count to the reads."""

from __future__ import annotations

import av
import numpy as np
import pytest
from av.codec.context import ThreadType

from tools import video_scan as S
from tools.video import VideoReader, read_frames
from tools.video_slices import frame_threads, slice_thread_count, slices_per_frame

AVCC = bytes([1, 0x64, 0, 0x1F, 0xFF])  # avcC header: NAL length size (0xFF & 3) + 1 = 4
HVCC = bytes([1] + [0] * 20 + [0x0F, 0])  # hvcC record: lengthSizeMinusOne at byte 21 = 3, no arrays (23 bytes)


def _prefixed(*nals: bytes, size: int = 4) -> bytes:
    return b"".join(len(n).to_bytes(size, "big") + n for n in nals)


def test_slices_of_hand_built_packets():
    sei, idr, non_idr = b"\x06\x05\x01\x80", b"\x65\x88\x84\x00", b"\x41\x9a\x02\x00"
    assert slices_per_frame(_prefixed(sei, idr, idr), "h264", AVCC) == 2  # SEI is not a slice
    assert slices_per_frame(_prefixed(idr), "h264", AVCC) == 1
    assert slices_per_frame(_prefixed(non_idr, non_idr, non_idr, size=2), "h264", bytes([1, 0, 0, 0, 0xFD])) == 3
    annex_b = b"\x00\x00\x00\x01" + sei + b"\x00\x00\x01" + idr + b"\x00\x00\x00\x01" + idr
    assert slices_per_frame(annex_b, "h264", None) == 2  # MPEG-TS: start codes, no avcC
    hevc_idr, hevc_vps = bytes([19 << 1, 1, 0xAF]), bytes([32 << 1, 1, 0x0C])
    assert slices_per_frame(_prefixed(hevc_vps, hevc_idr, hevc_idr, hevc_idr), "hevc", HVCC) == 3
    assert slices_per_frame(_prefixed(idr), "mpeg4", None) is None  # not counted for other codecs
    assert slices_per_frame(_prefixed(idr) + b"\x00\x00\x01\x00\x65", "h264", AVCC) is None  # a length past the end
    assert slices_per_frame(b"", "h264", AVCC) is None
    assert slices_per_frame(b"\x00\x00\x01\x06\x05", "h264", None) is None  # no slice in it


@pytest.mark.parametrize(("codec", "size", "slices", "expected"), [
    ("h264", (640, 360), 2, True),  # several slices: H.264's slice threads hide damage (one thread below 640x360)
    ("hevc", (640, 360), 2, False),  # several slices: slice threads decode them in parallel
    ("h264", (1280, 720), 1, True),  # one slice: frame threads
    ("h264", (1280, 720), None, True),  # unknown: one slice assumed
    ("hevc", (1920, 1080), 4, False),
    ("mpeg4", (1280, 720), None, True),
    ("mpeg4", (639, 360), None, False),  # small frames: frame threads cost ~3x the CPU
    ("h264", (320, 240), 1, False),
])
def test_threading_rule(codec, size, slices, expected):
    assert frame_threads(codec, *size, slices) is expected


def test_h264_gets_no_slice_threads():
    assert (slice_thread_count("h264"), slice_thread_count("hevc"), slice_thread_count("mpeg4")) == (1, 0, 0)


def _write(path, codec: str, *, single_slice: bool = False, fmt: str | None = None, size=(640, 368)):
    frames = np.zeros((3, size[1], size[0], 3), np.uint8)
    with av.open(str(path), "w", format=fmt) as c:
        s = c.add_stream(codec, rate=16)
        s.width, s.height, s.pix_fmt = *size, "yuv420p"
        if single_slice:  # x264 with frame threads writes one slice per frame
            s.codec_context.thread_type = "FRAME"
        elif codec == "libx264":  # PyAV's default (slice threads) writes one per core: two on any machine
            s.options = {"x264-params": "slices=2"}
        for t, f in enumerate(frames):
            f[:, :, 0] = 40 * t
            for p in s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


@pytest.mark.parametrize(("name", "codec", "single_slice", "fmt", "size", "threads"), [
    ("pyav.mp4", "libx264", False, None, (640, 368), (ThreadType.AUTO, 0)),  # PyAV: 2+ slices per frame
    ("pyav.ts", "libx264", False, "mpegts", (640, 368), (ThreadType.AUTO, 0)),
    ("single.mp4", "libx264", True, None, (640, 368), (ThreadType.AUTO, 0)),
    ("mpeg4.avi", "mpeg4", False, None, (640, 368), (ThreadType.AUTO, 0)),
    ("small.mp4", "libx264", True, None, (320, 192), (ThreadType.SLICE, 1)),
    ("small_sliced.mp4", "libx264", False, None, (320, 192), (ThreadType.SLICE, 1)),  # no slice threads: one thread
    ("small.avi", "mpeg4", False, None, (320, 192), (ThreadType.SLICE, 0)),
])
def test_reads_decode_with_the_threads_the_scan_chose(tmp_path, monkeypatch, name, codec, single_slice, fmt, size,
                                                     threads):
    path = _write(tmp_path / name, codec, single_slice=single_slice, fmt=fmt, size=size)
    chosen = []
    real = S.video_stream

    def spy(container, name, slices=None):
        stream = real(container, name, slices)
        chosen.append((stream.thread_type, stream.codec_context.thread_count))
        return stream

    monkeypatch.setattr("tools.video_reader.video_stream", spy)
    reader = VideoReader(path)
    got = reader.read([0, 1, 2])
    assert chosen and chosen[-1] == threads, (chosen, reader._order[0].slices)
    assert [int(round(v)) for v in got[:, 0, 0, 0]] == pytest.approx([0, 40, 80], abs=3)
    assert np.array_equal(got, read_frames(path, [0, 1, 2]))
