"""An MPEG-PS (.mpg) file cut inside a pack or a PES packet is truncated (`tools.mpegps_tail`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.test_video import id_frames, read_ids
from tools.video import VideoDecodeError, probe, read_all_frames, write_video


def _video_pes(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each video PES packet (stream id 0xE0) of a program stream."""
    return [(m.start(), m.start() + 6 + (data[m.start() + 4] << 8 | data[m.start() + 5]))
            for m in re.finditer(rb"\x00\x00\x01\xe0", data)]


@pytest.fixture
def mpg(tmp_path: Path) -> bytes:
    data = write_video(tmp_path / "c.mpg", id_frames(48), codec="mpeg2video", gop=4).read_bytes()
    assert read_ids(read_all_frames(data)) == list(range(48))
    return data


@pytest.mark.parametrize("into", [4, 5, 40, -30])
def test_a_program_stream_cut_inside_a_video_packet_is_truncated(tmp_path: Path, mpg: bytes, into: int) -> None:
    """Was: the frames before the cut, the last one decoded from part of its data (a damaged picture, or another
    frame's), no error."""
    start, end = _video_pes(mpg)[-1]
    cut = mpg[: (start if into > 0 else end) + into]
    with pytest.raises(VideoDecodeError, match="truncated file: it ends inside an MPEG-PS"):
        probe(cut)
    path = tmp_path / "cut.mpg"
    path.write_bytes(cut)
    with pytest.raises(VideoDecodeError, match="truncated"):
        read_all_frames(path)


@pytest.mark.parametrize("into", [7, 12])
def test_a_program_stream_cut_inside_or_right_after_a_pack_header_is_truncated(mpg: bytes, into: int) -> None:
    """12: the last pack's header whole (MPEG-1: 12 bytes), its packets gone; no muxer ends a file on an empty pack."""
    packs = [m.start() for m in re.finditer(rb"\x00\x00\x01\xba", mpg)]
    with pytest.raises(VideoDecodeError, match="truncated file: it ends inside an MPEG-PS"):
        probe(mpg[: packs[-1] + into])


def test_complete_and_padding_cut_program_streams_read_as_before(mpg: bytes) -> None:
    """A complete file, trailing zeros, and a cut inside the last pack's padding packet (no frame data lost)."""
    padding = [m.start() for m in re.finditer(rb"\x00\x00\x01\xbe", mpg)][-1]
    for data in (mpg, mpg + bytes(3), mpg[: padding + 20]):
        assert read_ids(read_all_frames(data)) == list(range(48))
