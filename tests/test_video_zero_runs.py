"""Zeroed bytes inside an H.264 / HEVC NAL unit that the decoder neither flags nor fails on: CABAC decodes the zeros as
valid, wrong macroblocks (no concealment, no error, on one thread or on frame threads, whatever ``err_detect``). A run
of three zero bytes is itself the damage: no NAL unit may hold one (emulation prevention), so the reader fails what the
packet reaches (``tools.video_nal_check``)."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from tests.test_video_concealed import (
    N,
    _damaged,
    _decode,
    _zero_a_fifth,
    failed_reads,
    frame_threaded_reads,
    gop12_clip,
)
from tools.video import VideoDecodeError, VideoReader
from tools.video_nal_check import broken_headers, broken_nal_unit, unreferenced


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> tuple[Path, np.ndarray]:
    """`gop12_clip`: 40 frames, B-frames, keyframes 0, 12, 24, 36, and its frames."""
    return gop12_clip(tmp_path_factory.mktemp("z"))


@pytest.mark.parametrize("threads", [1, 4])
@pytest.mark.parametrize("packet, damaged", [(4, range(4, 12)), (13, range(13, 24))])
def test_zeroed_bytes_the_decoder_does_not_flag_fail_the_frames_they_reach(tmp_path, monkeypatch, clean, threads,
                                                                          packet, damaged):
    """Packet 4 (frame 4, a P-frame) or 13 (frame 13, the P-frame after keyframe 12) has a fifth of its bytes zeroed:
    FFmpeg decodes it with no flag and no error, and the frames up to the next keyframe come out wrong. Each was handed
    out as the clip's frame. Now each read of them fails; the frames before the packet and from the next keyframe on
    read as in the clean clip, as does a whole read of them."""
    path, want = clean
    bad = _damaged(path, packet, _zero_a_fifth)
    decoded = _decode(bad)
    assert not any(flagged for _, flagged in decoded.values()) and len(decoded) == N  # the premise: no signal
    got = np.stack([decoded[p][0] for p in sorted(decoded)])
    assert [i for i in range(N) if not np.array_equal(got[i], want[i])] == list(damaged)
    if threads > 1:
        frame_threaded_reads(monkeypatch, threads)
    with VideoReader(bad) as reader:
        assert failed_reads(reader, want) == list(damaged)
        with pytest.raises(VideoDecodeError, match=f"frame {damaged[0]} of {N} could not be decoded.*zero bytes"):
            reader.read(range(N))
        keep = [i for i in range(N) if i not in damaged]
        assert np.array_equal(reader.read(keep), want[keep])


@pytest.mark.parametrize("threads", [1, 4])
def test_zeroed_bytes_of_a_b_frame_no_frame_references_fail_that_frame_alone(tmp_path, monkeypatch, clean, threads):
    """Packet 3 (frame 2, a B-frame whose slice says no picture references it: nal_ref_idc 0) has a fifth zeroed:
    only frame 2 comes out wrong, no signal. Its read fails; frames 3-11, decoded after it, still read."""
    path, want = clean
    bad = _damaged(path, 3, _zero_a_fifth)
    got = _decode(bad)
    assert [i for i, p in enumerate(sorted(got)) if not np.array_equal(got[p][0], want[i])] == [2]  # the premise
    if threads > 1:
        frame_threaded_reads(monkeypatch, threads)
    with VideoReader(bad) as reader:
        assert failed_reads(reader, want) == [2]
        with pytest.raises(VideoDecodeError, match=f"frame 2 of {N} could not be decoded.*no frame references"):
            reader.read(range(N))


def test_a_nal_unit_is_broken_by_three_zero_bytes_inside_it_not_by_its_escapes_or_trailing_zeros():
    """Length-prefixed (an avcC record's 4-byte lengths) and Annex B: 00 00 00, 00 00 01 and 00 00 02 cannot occur
    inside a NAL unit (the encoder escapes them: 00 00 03); zero bytes after its last byte are padding."""
    avcc = bytes([1, 100, 0, 30, 0xFF])  # (its 5th byte: 4-byte lengths)

    def prefixed(*units: bytes) -> bytes:
        return b"".join(len(u).to_bytes(4, "big") + u for u in units)

    assert broken_nal_unit(prefixed(b"\x65\x88\x00\x00\x00\x17"), "h264", avcc)
    assert broken_nal_unit(prefixed(b"\x06\x05\x11", b"\x41\x9a\x00\x00\x02\x42"), "h264", avcc)
    assert not broken_nal_unit(prefixed(b"\x65\x88\x00\x00\x03\x00\x17", b"\x41\x9a\x00\x00"), "h264", avcc)
    assert not broken_nal_unit(prefixed(b"\x41\x00\x00\x03\x01"), "h264", avcc)
    assert broken_nal_unit(b"\x00\x00\x00\x01\x65\x88\x00\x00\x00\x00\x17", "h264", None)
    assert not broken_nal_unit(b"\x00\x00\x00\x01\x65\x88\x00\x00\x00\x00\x01\x41\x17", "h264", None)
    assert not broken_nal_unit(prefixed(b"\x00\x00\x00"), "mpeg4", avcc)  # (not H.264 / HEVC)
    headers = broken_headers(prefixed(b"\x01\x9e\x00\x00\x00\x17", b"\x41\x9a\x00\x00\x00\x42"), "h264", avcc)
    assert headers == [0x01, 0x41] and not unreferenced(headers, "h264")  # (a reference slice among them)
    assert unreferenced(headers[:1], "h264") and not unreferenced([0x06], "h264")  # (an SEI's damage reaches on)


SIGNING_SEI = b"\x06\x05\x20" + bytes([7]) * 16 + b"\x00\x00\x00\x01\x15\x00\x00\x02" + bytes([9]) * 8 + b"\x80"
"""An H.264 SEI (user data unregistered, 32 bytes) written without emulation prevention, as ONVIF Media Signing allows
for its SEI (Axis cameras' signed video; its test vectors carry a raw 00 00 00 01, then bytes that read as a NAL
unit of type 21): the decoder skips it."""


def _with_sei(src: Path, dst: Path, sei: bytes) -> Path:
    """``src`` (an MP4 of 4-byte NAL lengths) remuxed with the unit ``sei`` before each packet's units."""
    with av.open(str(src)) as ic, av.open(str(dst), "w") as oc:
        stream = ic.streams.video[0]
        out = oc.add_stream_from_template(stream)
        for packet in ic.demux(stream):
            if not packet.size:
                continue
            new = av.Packet(len(sei).to_bytes(4, "big") + sei + bytes(packet))
            new.pts, new.dts, new.time_base, new.is_keyframe = packet.pts, packet.dts, packet.time_base, \
                packet.is_keyframe
            new.stream = out
            oc.mux(new)
    return dst


def test_a_unit_that_codes_no_picture_is_not_checked():
    """Only the units the decoder makes pictures of (slices, parameter sets) break the clip: an SEI, filler or an
    unspecified unit with a raw 00 00 00 01 (written so by some devices) damages no frame."""
    avcc = bytes([1, 100, 0, 30, 0xFF])
    slice_ = b"\x41\x9a\x00\x00\x03\x01\x42"

    def prefixed(*units: bytes) -> bytes:
        return b"".join(len(u).to_bytes(4, "big") + u for u in units)

    for other in (SIGNING_SEI, b"\x0c\xff\x00\x00\x00\xff\x80", b"\x18\x00\x00\x00\x01\x80"):  # SEI, filler, type 24
        assert not broken_nal_unit(prefixed(other, slice_), "h264", avcc)
    hevc_sei = b"\x4e\x01\x05\x10" + bytes(16) + b"\x00\x00\x01\x80"  # (prefix SEI, type 39)
    hvcc = bytes([1]) + bytes(20) + bytes([0xFF, 0])
    assert not broken_nal_unit(prefixed(hevc_sei, b"\x02\x01\xd0\x00\x00\x03\x01\x80"), "hevc", hvcc)
    assert broken_nal_unit(prefixed(hevc_sei, b"\x02\x01\xd0\x00\x00\x00\x01\x80"), "hevc", hvcc)
    assert broken_nal_unit(prefixed(b"\x67\x64\x00\x00\x00\x1f", slice_), "h264", avcc)  # (an SPS: decoded)


def test_a_clean_clip_whose_seis_hold_raw_start_codes_reads_whole(tmp_path, clean):
    """The clean clip with such an SEI in each packet: FFmpeg decodes it as the clean clip; every frame reads, by a
    whole read and one by one."""
    path, want = clean
    signed = _with_sei(path, tmp_path / "signed.mp4", SIGNING_SEI)
    got = _decode(signed)
    assert np.array_equal(np.stack([got[p][0] for p in sorted(got)]), want)  # the premise
    with VideoReader(signed) as reader:
        assert np.array_equal(reader.read(range(N)), want)
        assert failed_reads(reader, want) == []
