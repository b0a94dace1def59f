"""H.264 field pictures whose stream holds two sequence parameter sets by id (a progressive one and a field-coded one,
each with its PPS): each slice's fields are read with the SPS its PPS names."""

from __future__ import annotations

import re
from pathlib import Path

import av
import pytest

from tests.h264_fields import field_coded
from tests.test_video_field_pictures import _decoded, _progressive, _read_all, _switch_to_matroska
from tools import h264_field_pairs
from tools.h264_field_pairs import FieldPairs
from tools.video import probe


def _units(stream: bytes) -> list[bytes]:
    return [b"\x00\x00\x00\x01" + u for u in stream.split(b"\x00\x00\x00\x01")[1:]]


def _two_sps(tmp_path: Path, order: str) -> Path:
    """x264's 9 progressive frames (SPS and PPS 0) then 8 field-coded ones (SPS and PPS 1, sent only up front: ahead
    of the first frame, before or after the progressive ones)."""
    progressive = _progressive(tmp_path / "p.h264", "h264", bframes=0).read_bytes()
    fields = _units(field_coded(8, gop=4, sid=1))
    sets, pictures = b"".join(fields[:2]), b"".join(fields[2:])
    path = tmp_path / f"{order}.h264"
    at = progressive.index(b"\x00\x00\x01\x06")  # x264's SEI, after its SPS and PPS
    path.write_bytes(sets + progressive + pictures if order == "fields-sps-first" else
                     progressive[:at] + sets + progressive[at:] + pictures)
    return path


@pytest.mark.parametrize("order", ["fields-sps-first", "fields-sps-last"])
def test_fields_read_with_the_sps_their_pps_names(tmp_path, order):
    """Both parameter sets ahead of the first frame: only the last SPS of a packet was kept. Read last, the progressive
    one hid the fields (each counted: 25 frames for the decoder's 17); read last, the field-coded one had the
    progressive slices read as fields."""
    path = _two_sps(tmp_path, order)
    want = _decoded(path)
    assert len(want) == 17 and probe(path).frames == 17 and _read_all(path) == want


def test_fields_of_an_avcc_record_with_two_sps(tmp_path):
    """The same stream copied to Matroska: its avcC record holds both SPS and both PPS; only its first SPS was read."""
    raw = _two_sps(tmp_path, "fields-sps-first")
    path = _switch_to_matroska(raw, tmp_path / "two.mkv")
    with av.open(str(path)) as c:
        record = c.streams.video[0].codec_context.extradata
    assert record[:1] == b"\x01"
    want = _decoded(path)
    assert len(want) == 17 and probe(path).frames == 17 and _read_all(path) == want


@pytest.mark.parametrize("container", ["h264", "mkv"])
def test_fields_whose_sets_came_with_a_p_picture(tmp_path, container):
    """The field-coded SPS and PPS sent with the last progressive P picture (no keyframe), ahead of the IDR field that
    starts using them: the pairing looked for sets in keyframes alone and read the fields with the progressive SPS,
    each a frame (25 for the decoder's 17)."""
    split = re.split(b"\x00\x00\x00\x01|\x00\x00\x01", _progressive(tmp_path / "p.h264", "h264", bframes=0).read_bytes())
    progressive = [b"\x00\x00\x00\x01" + u for u in split if u]
    fields = _units(field_coded(8, gop=4, sid=1))
    at = [k for k, u in enumerate(progressive) if u[4] & 0x1F in (1, 5)][7]  # frame 7's slice: a P picture
    assert progressive[at][4] & 0x1F == 1
    path = tmp_path / "mid.h264"
    path.write_bytes(b"".join(progressive[:at] + fields[:2] + progressive[at:] + fields[2:]))
    if container == "mkv":
        path = _switch_to_matroska(path, tmp_path / "mid.mkv")
    want = _decoded(path)
    assert len(want) == 17 and probe(path).frames == 17 and _read_all(path) == want


@pytest.mark.parametrize(("fmt", "ext"), [("mp4", "mp4"), ("matroska", "mkv"), ("h264", "h264"), ("mpegts", "ts")])
def test_packets_that_open_with_a_slice_are_not_searched_for_parameter_sets(tmp_path, monkeypatch, fmt, ext):
    """A packet whose first NAL unit is a slice (after a delimiter: MPEG-TS) holds no set ahead of it: the pairing
    learns nothing from it, and so reads nothing of it (the scan asks this of every packet: looking for sets in each
    one cost the common progressive clip's scan ~20% more CPU a packet)."""
    path = _progressive(tmp_path / f"p.{ext}", fmt)
    with av.open(str(path)) as c:
        packets = list(c.demux(video=0))
        pairs = FieldPairs(c.streams.video[0].codec_context.extradata)
    searched = []
    real = h264_field_pairs.h264_parameter_sets
    monkeypatch.setattr(h264_field_pairs, "h264_parameter_sets",
                        lambda data, extradata: searched.append(bytes(data)) or real(data, extradata))
    assert [p for p, _ in pairs.frames(packets)] == packets
    sliced = [bytes(p) for p in packets if p.size and 1 <= _first_unit(bytes(p), fmt) & 0x1F <= 5]
    assert len(sliced) >= 5 and not set(sliced) & set(searched)
    assert len(searched) == sum(1 for p in packets if p.size) - len(sliced)


def _first_unit(data: bytes, fmt: str) -> int:
    """The header byte of the first NAL unit of an x264 packet but a leading delimiter (MP4 / Matroska: 4-byte
    lengths; MPEG-TS: Annex B, a delimiter first)."""
    if fmt in ("mp4", "matroska"):
        return data[4]
    units = re.split(b"\x00\x00\x00\x01|\x00\x00\x01", data)[1:]
    return units[1][0] if units[0][0] & 0x1F == 9 else units[0][0]
