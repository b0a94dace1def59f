"""H.264 packets framed by Annex B start codes behind an avcC record (4-byte lengths), which FFmpeg's decoder takes as
Annex B (its rule: ``tools.video_nal_check.start_code_framed``): the zero-run check splits them as the decoder does."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from tests.h264_fields import field_coded
from tests.h264_rewrite import remuxed
from tests.test_video import write_raw
from tests.test_video_concealed import (
    N,
    _damaged,
    _decode,
    _gradient_ids,
    _packets,
    _zero_a_fifth,
    failed_reads,
    gop12_clip,
)
from tools.h264_field_pairs import FieldPairs
from tools.video import VideoDecodeError, VideoReader
from tools.video_nal_check import broken_headers, start_code_file, start_code_framed

AVCC = bytes([1, 100, 0, 30, 0xFF])  # (its 5th byte: 4-byte lengths)


@pytest.fixture(scope="module")
def annex_b(tmp_path_factory) -> tuple[Path, np.ndarray]:
    """The 40-frame H.264 MP4 (B-frames, keyframes every 12) with each NAL unit's 4-byte length replaced by a start
    code (00 00 00 01), its avcC record kept, and the clean clip's frames."""
    path = write_raw(tmp_path_factory.mktemp("a") / "c.mp4", _gradient_ids(), gop=12)
    data = bytearray(path.read_bytes())
    for packet in _packets(path):
        at = packet.pos
        while at < packet.pos + packet.size:
            length = int.from_bytes(data[at:at + 4], "big")
            data[at:at + 4] = b"\x00\x00\x00\x01"
            at += 4 + length
    framed = path.with_name("annexb.mp4")
    framed.write_bytes(bytes(data))
    good = _decode(path)
    assert {p: f for p, (f, _) in _decode(framed).items()}.keys() == good.keys()  # the premise: FFmpeg decodes it
    return framed, np.stack([good[p][0] for p in sorted(good)])


def test_a_clean_clip_of_annex_b_packets_behind_an_avcc_record_reads_whole(annex_b):
    path, want = annex_b
    with VideoReader(path) as reader:
        assert np.array_equal(reader.read(range(N)), want)


def test_zeroed_bytes_in_annex_b_packets_behind_an_avcc_record_fail_the_frames_they_reach(annex_b):
    """Packet 4 (frame 6, a P-frame) of the Annex B packets has a fifth zeroed: FFmpeg decodes frames 4-11 wrong, no
    flag. The check read the start code as a length of 1 and the next "length" past the packet, and checked nothing:
    each came back as the clip's frame. Now each read of them fails; the other frames read as in the clean clip."""
    path, want = annex_b
    bad = _damaged(path, 4, _zero_a_fifth)
    got = _decode(bad)
    assert [i for i, p in enumerate(sorted(got)) if not np.array_equal(got[p][0], want[i])] == list(range(4, 12))
    with VideoReader(bad) as reader:
        assert failed_reads(reader, want) == list(range(4, 12))


def test_the_framing_follows_ffmpegs_rule():
    """FFmpeg's H.264 decoder (4-byte lengths only) takes a packet as Annex B where it opens with 00 00 00 01 and the 4
    bytes after the unit header read past its end; as length-prefixed where its first length is above 1 and within it;
    else as the packet before it was taken."""
    slice_ = bytes([0x41, 0x9A, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60])
    framed = b"\x00\x00\x00\x01" + slice_ + b"\x00\x00\x00\x00\x11\x22"
    assert start_code_framed(framed, "h264", AVCC, before=False)
    prefixed = len(slice_).to_bytes(4, "big") + slice_
    assert not start_code_framed(prefixed, "h264", AVCC, before=True)
    assert start_code_framed(b"\x00\x00\x00\x00\x41\x9A\x10\x20\x30", "h264", AVCC, before=True)  # (neither: as before)
    assert not start_code_framed(framed, "h264", bytes([1, 100, 0, 30, 0xFE]), before=False)  # (3-byte lengths)
    assert not start_code_framed(framed, "hevc", None, before=False)
    assert broken_headers(framed, "h264", AVCC, annex_b=True) == [0x41]
    assert broken_headers(framed, "h264", AVCC) == []  # (as length-prefixed: a 1-byte unit, then a length past it)


@pytest.mark.parametrize("tail", [b"\x09\xf0", b"\x06\x05\x01\x00\x80"], ids=["delimiter", "sei"])
def test_a_sample_of_no_picture_among_annex_b_samples_behind_an_avcc_record_is_no_frame(tmp_path, tail):
    """The 40-frame clip remuxed with its samples framed by start codes behind its avcC record, and a last sample of
    no picture (an access unit delimiter, or an SEI): no frame, as the same sample length-prefixed is. The scan read
    it as length-prefixed (a 1-byte unit, then a length past its end: not a sample of no picture) and counted 41
    frames, the last of which no decode gives."""
    clip, want = gop12_clip(tmp_path)
    for annex in (False, True):  # (length-prefixed: the premise)
        with VideoReader(remuxed(clip, tmp_path / f"t{annex}.mp4", annex_b=annex, tail=tail)) as reader:
            assert reader.meta.frames == N, annex
            assert np.array_equal(reader.read(range(N)), want)


def test_a_files_framing_is_decided_once_by_its_first_packet_with_data():
    """``start_code_file``: the first packet with data decides (an ambiguous one after it changes nothing), and the
    packets come back whole, in order."""
    slice_ = bytes([0x41, 0x9A, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60])
    framed = b"\x00\x00\x00\x01" + slice_ + b"\x00\x00\x00\x00\x11\x22"
    prefixed = len(slice_).to_bytes(4, "big") + slice_
    for first, want in ((framed, True), (prefixed, False)):
        packets = [av.Packet(b""), av.Packet(first), av.Packet(b"\x00\x00\x00\x00\x41\x9A\x10\x20\x30")]
        out, annex_b = start_code_file(packets, "h264", AVCC)
        assert annex_b is want and [bytes(p) for p in out] == [bytes(p) for p in packets]
    assert start_code_file([av.Packet(framed)], "hevc", None)[1] is False


def test_second_fields_of_annex_b_packets_behind_an_avcc_record():
    """Field pictures (PAFF) framed by start codes behind an avcC record without parameter sets (an 'avc3' sample
    entry: the SPS comes in the first sample): the pairing reads them as the file's framing says (``annex_b``), the SPS
    found; read as length-prefixed, none was, and every field counted as a frame."""
    sps, pps, *fields = field_coded(3).split(b"\x00\x00\x00\x01")[1:]
    record = bytes([1, 77, 0, 30, 0xFF, 0xE0, 0])  # (4-byte lengths; no SPS, no PPS)
    units = [[sps, pps, fields[0]], *([f] for f in fields[1:])]
    packets = [av.Packet(b"".join(b"\x00\x00\x00\x01" + u for u in us)) for us in units]
    packets_of, annex_b = start_code_file(packets, "h264", record)
    assert annex_b
    assert [no_frame for _, no_frame in FieldPairs(record, annex_b=annex_b).frames(packets_of)] == [False, True] * 3


@pytest.mark.parametrize("framed", [{0}, set(range(0, N, 2)), set(range(1, N))], ids=["first", "even", "all-but-first"])
def test_a_file_whose_samples_change_framing_fails_clearly(tmp_path, framed):
    """The 40-frame clip remuxed with some samples framed by start codes, the rest length-prefixed (FFmpeg takes each
    as its first bytes say and decodes all 40 frames as the clean clip). Framed once for the file by its first packet,
    a length-prefixed sample of 256-511 bytes read as a start code (00 00 01) and a unit of no picture: the scan
    counted 39 frames, frames 11-38 came back as their successors, no error. Now the file fails, naming its framing."""
    clip, want = gop12_clip(tmp_path)
    mixed = remuxed(clip, tmp_path / "m.mp4", annex_b=framed)
    got = _decode(mixed)
    assert np.array_equal(np.stack([got[p][0] for p in sorted(got)]), want)  # the premise: FFmpeg decodes it whole
    with pytest.raises(VideoDecodeError, match="framing"), VideoReader(mixed) as reader:
        reader.read(range(N))
