"""HEVC pictures not for output (``pic_output_flag`` 0): the decoder gives no frame for them, and the scan counts
none (tools.hevc_output)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from tests.hevc_output import hidden
from tests.test_video import read_ids
from tools.hevc_output import HevcOutput
from tools.video import VideoReader

N = 8


def _mp4(src: Path, dest: Path) -> Path:
    """`src`'s packets as MP4 samples (its parameter sets in the hvcC record), one a frame at 16 fps (all intra: decode
    order is presentation order)."""
    with av.open(str(src)) as c, av.open(str(dest), "w") as out:
        stream = out.add_stream_from_template(c.streams.video[0])
        for i, packet in enumerate(p for p in c.demux(video=0) if p.size):
            packet.stream, packet.time_base = stream, Fraction(1, 16)
            packet.pts, packet.dts, packet.duration = i, i, 1
            out.mux(packet)
    return dest


@pytest.mark.parametrize("container", ["raw", "mp4"])
def test_a_picture_not_for_output_is_no_frame(tmp_path, container):
    """Picture 3 of 8 is not for output: the scan counted 8 frames, the decoder gives 7, and every read from frame 3 on
    failed (without timestamps) or frame 3 never came (with them)."""
    path = hidden(tmp_path / "h.hevc", N, {3})
    if container == "mp4":
        path = _mp4(path, tmp_path / "h.mp4")
    with av.open(str(path)) as c:  # the premise
        assert read_ids(np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])) == [0, 1, 2, 4, 5, 6, 7]
    with VideoReader(path) as reader:
        assert (reader._order[0].pts is None) is (container == "raw")
        assert reader.meta.frames == N - 1
        assert read_ids(reader.read(range(N - 1))) == [0, 1, 2, 4, 5, 6, 7]
        assert read_ids(reader.read([4, 3])) == [5, 4]


def test_every_picture_for_output_is_a_frame(tmp_path):
    """The PPS sets the flag, every slice 1: all count."""
    with VideoReader(hidden(tmp_path / "h.hevc", N, set())) as reader:
        assert reader.meta.frames == N
        assert read_ids(reader.read([0, 7])) == [0, 7]


def _version_0(mp4: Path) -> Path:
    """`mp4` with its hvcC record's configurationVersion 0, as records written before the standard had it (FFmpeg
    reads such a record as hvcC: its next bytes are no Annex B start code)."""
    data = bytearray(mp4.read_bytes())
    at = data.index(b"hvcC") + 4
    assert data[at] == 1
    data[at] = 0
    mp4.write_bytes(bytes(data))
    return mp4


def test_an_hvcc_record_of_version_0(tmp_path):
    """Its packets were read as Annex B: the record's PPS was not found, and the picture not for output counted."""
    path = _version_0(_mp4(hidden(tmp_path / "h.hevc", N, {3}), tmp_path / "h.mp4"))
    with VideoReader(path) as reader:
        assert reader.meta.frames == N - 1
        assert read_ids(reader.read(range(N - 1))) == [0, 1, 2, 4, 5, 6, 7]


@pytest.mark.parametrize("version", [1, 0])
def test_the_pps_of_an_hvcc_record_alone(tmp_path, version):
    """An MP4 whose samples carry no parameter sets (the record holds them): the record's PPS sets the flag."""
    with av.open(str(_mp4(hidden(tmp_path / "h.hevc", N, {3}), tmp_path / "h.mp4"))) as c:
        record = bytes([version]) + c.streams.video[0].codec_context.extradata[1:]
        samples = [bytes(p) for p in c.demux(video=0) if p.size]

    def slices(sample: bytes) -> bytes:  # its slice NAL units alone (4-byte lengths)
        out, i = b"", 0
        while i < len(sample):
            n = int.from_bytes(sample[i:i + 4], "big")
            out += sample[i:i + 4 + n] if (sample[i + 4] >> 1) & 0x3F < 32 else b""
            i += 4 + n
        return out

    output = HevcOutput(record)
    assert [output.shown(av.Packet(slices(s))) for s in samples] == [k != 3 for k in range(N)]
    assert all(HevcOutput(None).shown(av.Packet(slices(s))) for s in samples)  # no PPS known: every picture shown


def _with_sei(raw: bytes, size: int) -> bytes:
    """The Annex B HEVC stream `raw` with a prefix SEI of user data (unregistered) of `size` bytes before each
    picture's first slice."""
    body = bytes([5]) + b"\xff" * (size // 255) + bytes([size % 255]) + bytes((i % 250) + 1 for i in range(size))
    sei = b"\x00\x00\x00\x01\x4e\x01" + body + b"\x80"
    units = [u for u in raw.split(b"\x00\x00\x00\x01") if u]
    return b"".join((sei if (u[0] >> 1) & 0x3F < 32 else b"") + b"\x00\x00\x00\x01" + u for u in units)


def test_a_first_slice_past_an_sei_of_16_kib(tmp_path):
    """Each picture's first slice lay past the 16 KiB of the packet searched for it: picture 3, not for output, was
    counted, and every read from it on failed."""
    path = hidden(tmp_path / "h.hevc", N, {3})
    path.write_bytes(_with_sei(path.read_bytes(), 20000))
    with VideoReader(path) as reader:
        assert reader.meta.frames == N - 1
        assert read_ids(reader.read(range(N - 1))) == [0, 1, 2, 4, 5, 6, 7]
