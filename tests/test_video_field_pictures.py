"""A raw H.264 stream (no timestamps) coded as field pictures (PAFF, as 1080i broadcast H.264 is): FFmpeg's parser
gives each field its own packet and the decoder one frame for the two. The reader counts the decoder's output there.
Since the count check (tools.video_decode.CountCheck) every read fails: the second field's packet gives no frame of
its own, so the check takes it for a frame the decoder dropped (FrameDropped: "dropped the frame of packet 1"), where
before frame 0..19 read as they should. The scan counts packets as frames (40 for 20), a clip twice its length whose
frames past the middle could never be read. The scan now finds each pair's second field (field_pic_flag and frame_num
in the slice header, read with the SPS: tools.h264_field_pairs.FieldPairs), counts the pair as one frame, and the count
check does not wait on the second field's packet."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from tests.h264_fields import field_coded
from tools.h264_field_pairs import FieldPairs
from tools.video import VideoDecodeError, VideoReader, probe

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


def test_frames_of_a_field_coded_stream_read_as_themselves(tmp_path: Path) -> None:
    path = _clip(tmp_path)
    with av.open(str(path)) as c:
        want = [f.to_ndarray(format="rgb24").mean() for f in c.decode(video=0)]
    r = VideoReader(path)
    got = r.read([0, 5, N - 1]).mean(axis=(1, 2, 3))
    assert [round(float(g)) for g in got] == [round(float(want[i])) for i in (0, 5, N - 1)]


def test_a_field_coded_stream_counts_its_frames(tmp_path: Path) -> None:
    assert probe(_clip(tmp_path)).frames == N


def test_an_mbaff_stream_is_not_taken_for_fields(tmp_path: Path) -> None:
    # libx264's interlacing: an SPS that allows fields (frame_mbs_only_flag 0, High profile) but frame pictures, one
    # packet each: every packet is a frame
    path = tmp_path / "mbaff.h264"
    with av.open(str(path), "w", format="h264") as c:
        s = c.add_stream("libx264", rate=25)
        s.width, s.height, s.pix_fmt, s.options = 64, 64, "yuv420p", {"x264-params": "interlaced=1"}
        for i in range(6):
            for p in s.encode(av.VideoFrame.from_ndarray(np.full((64, 64, 3), 30 * i, np.uint8), format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    assert probe(path).frames == 6
    got = VideoReader(path).read([0, 5]).mean(axis=(1, 2, 3))
    assert [round(float(g) / 30) for g in got] == [0, 5]


def test_second_fields_of_length_prefixed_packets() -> None:
    # as MP4 / Matroska carry H.264: the SPS in the avcC record, each packet's NAL units length-prefixed
    sps, pps, *fields = field_coded(3).split(b"\x00\x00\x00\x01")[1:]
    avcc = bytes([1, 77, 0, 30, 0xFF, 0xE1]) + len(sps).to_bytes(2, "big") + sps + b"\x01" + \
        len(pps).to_bytes(2, "big") + pps
    packets = [av.Packet(len(f).to_bytes(4, "big") + f) for f in fields]
    assert [no_frame for _, no_frame in FieldPairs(avcc).frames(packets)] == [False, True] * 3


def test_packets_without_start_codes_are_no_fields() -> None:
    # H.264 with no avcC record (an AVI or Matroska track without one) is read as Annex B: a packet there with no
    # start code (length-prefixed after all, or garbage) raised zip()'s ValueError from the NAL unit split, an internal
    # fault out of the scan (tools.video_errors.wrapped lets this project's ValueErrors through) for a clip whose
    # packets the decoder may well read
    assert [n for _, n in FieldPairs(None).frames([av.Packet(b"\x00\x00\x00\x05\x65\x88\x84\x00\x10")])] == [False]
    assert [n for _, n in FieldPairs(b"\x67\x4d\x00\x1e").frames([av.Packet(b"\x12\x34")])] == [False]


def _start_trimmed(tmp_path: Path, shift: int = 10) -> Path:
    """The fields of 20 frames (an IDR frame every 4) as MP4 samples, one a field (a stream copy of broadcast MPEG-TS),
    shifted `shift` fields before 0 (10: 5 frames, the muxer's edit list starts at frame 5, and FFmpeg demuxes frame 4's
    two packets marked discard, its frame dropped, before the kept ones)."""
    raw = tmp_path / "fields.h264"
    raw.write_bytes(field_coded(N, gop=4))
    path = tmp_path / "late.mp4"
    with av.open(str(raw)) as i, av.open(str(path), "w") as o:
        so = o.add_stream_from_template(i.streams.video[0])
        so.time_base = tb = Fraction(1, 50)  # (the muxer sets its own once it starts: 1/12800)
        for k, p in enumerate(p for p in i.demux(video=0) if p.size):
            p.stream, p.time_base, p.pts, p.dts, p.duration = so, tb, k - shift, k - shift, 1
            p.is_keyframe = k % 8 == 0  # the IDR frames' first fields (FFmpeg's parser marks every I picture)
            o.mux(p)
    return path


def test_second_fields_after_discarded_packets_are_not_waited_on(tmp_path: Path) -> None:
    # the scan numbered the second fields among all packets, discarded ones included, where the count check's tags
    # (since f4995fc) skip those: counting the output, it waited on the kept stream's first second field (packet 1)
    # and the read failed as FrameDropped ("dropped the frame of packet 1"); the timestamps' read was right
    path = _start_trimmed(tmp_path)
    with av.open(str(path)) as c:
        assert [p.is_discard for p in c.demux(video=0) if p.size][:3] == [True, True, False]
    with VideoReader(path) as reader:
        index = reader._order[0]
        assert reader.meta.frames == N - 5 and index.fields[:3] == (1, 3, 5) and round(reader.meta.duration, 3) == 0.6
        want = reader.read([3, 9]).mean(axis=(1, 2, 3))
        reader._order = (replace(index, pts=None, keyframes=(), reorder=None), None)  # as `OutOfOrder` leaves it
        got = reader.read([3, 9]).mean(axis=(1, 2, 3))  # (from the first keyframe: frame 8)
    assert [round(float(g)) for g in got] == [round(float(w)) for w in want]


def test_an_edit_list_that_discards_a_pairs_first_field(tmp_path: Path) -> None:
    # the edit starts at frame 4's second field: its first one (the keyframe) is demuxed marked discard and decoded all
    # the same, so the kept second field completes a frame the decoder drops; it is no frame of the clip's, the first
    # field after it starts one
    path = _start_trimmed(tmp_path, shift=9)
    with av.open(str(path)) as c:
        assert [p.is_discard for p in c.demux(video=0) if p.size][:2] == [True, False]
    want = _decoded(path)
    with VideoReader(path) as reader:
        index = reader._order[0]
        assert reader.meta.frames == len(want) == N - 5 and index.fields[:3] == (0, 2, 4) and index.primed
        got = [round(float(m), 1) for m in reader.read(list(range(N - 5))).mean(axis=(1, 2, 3))]
        reader._order = (replace(index, pts=None, keyframes=(), reorder=None), None)  # counting the decoder's output
        counted = [round(float(m), 1) for m in reader.read(list(range(N - 5))).mean(axis=(1, 2, 3))]
    assert got == counted == want


def _fields(frames: int, gop: int) -> tuple[bytes, list[bytes]]:
    """The SPS and PPS of `field_coded`, and its field pictures' NAL units, in decode order (Annex B)."""
    sps, pps, *fields = (b"\x00\x00\x00\x01" + u for u in field_coded(frames, gop=gop).split(b"\x00\x00\x00\x01")[1:])
    return sps + pps, fields


def _mpegts(path: Path, per_pes: int, drop: tuple[int, ...] = (), frames: int = N) -> Path:
    """The field pictures of `frames` frames (an IDR frame every 4) in MPEG-TS, as 1080i broadcast carries them: one
    field (`per_pes` 1) or a frame's two fields (2) to a PES packet, each with its pts (50 fields a second); the
    fields at `drop` (decode order) lost."""
    headers, fields = _fields(frames, 4)
    with av.open(str(path), "w", format="mpegts") as c:
        s = c.add_stream("h264")
        s.width = s.height = 64
        s.time_base = tb = Fraction(1, 90000)
        kept = [(k, f) for k, f in enumerate(fields) if k not in drop]
        for n in range(0, len(kept), per_pes):
            k = kept[n][0]
            p = av.Packet((headers if n == 0 or k % 8 == 0 else b"") + b"".join(f for _, f in kept[n:n + per_pes]))
            p.stream, p.time_base, p.pts, p.dts, p.is_keyframe = s, tb, 3600 + k * 1800, 3600 + k * 1800, k % 8 == 0
            c.mux(p)
    return path


def _decoded(path: Path) -> list[float]:
    with av.open(str(path)) as c:
        return [round(float(f.to_ndarray(format="rgb24").mean()), 1) for f in c.decode(video=0)]


def _read_all(path: Path) -> list[float]:
    with VideoReader(path) as r:
        return [round(float(m), 1) for m in r.read(list(range(r.meta.frames))).mean(axis=(1, 2, 3))]


@pytest.mark.parametrize("per_pes", [1, 2])
def test_field_coded_mpegts_counts_its_frames(tmp_path: Path, per_pes: int) -> None:
    # 1080i broadcast: FFmpeg's MPEG-TS demuxer parses the stream, so a PES of two fields gives two packets (the
    # second without a pts) as one of a field does; 20 frames at 25 fps, each read as itself
    path = _mpegts(tmp_path / "i.ts", per_pes)
    meta = probe(path)
    assert (meta.frames, meta.fps, round(meta.duration, 3)) == (N, 25.0, 0.8)
    assert meta.times is not None and [round(t, 3) for t in meta.times] == [round(k * 0.04, 3) for k in range(N)]
    assert _read_all(path) == _decoded(path)


@pytest.mark.parametrize("drop", [(0,), (4,), (5,), (15,)], ids=["lone-second-first", "first-lost", "second-lost",
                                                                 "last-second-lost"])
@pytest.mark.parametrize("timed", [True, False], ids=["mpegts", "raw"])
def test_a_field_without_its_pair_is_no_frame(tmp_path: Path, drop: tuple[int, ...], timed: bool) -> None:
    # a field whose pair was lost (a broadcast capture that starts or ends between a frame's two fields, a lost TS
    # packet): FFmpeg's decoder shows no frame for it (h264_field_start: "Previous field is unmatched. Don't display
    # it"). The scan counted it: with timestamps an 8-frame clip whose unmatched field's frame failed every read of
    # it ("got pts ... instead"), without them every read past it failed as FrameDropped
    if timed:
        path = _mpegts(tmp_path / "gap.ts", 1, drop, frames=8)
    else:
        path = tmp_path / "gap.h264"
        headers, fields = _fields(8, 4)
        path.write_bytes(headers + b"".join(f for k, f in enumerate(fields) if k not in drop))
    want = _decoded(path)
    # (without timestamps the frames before the first keyframe the decoder flags, frame 3 of the clip that starts on
    # the IDR frame's second field, are unread)
    lead = 3 if drop == (0,) and not timed else 0
    with VideoReader(path) as r:
        assert r.meta.frames == len(want) == 7
        got = [round(float(m), 1) for m in r.read(list(range(lead, 7))).mean(axis=(1, 2, 3))]
        if lead:
            with pytest.raises(VideoDecodeError, match="starts mid-GOP"):
                r.read([0])
    assert got == want[lead:]


def test_a_matroska_block_per_field_holds_its_last_frame(tmp_path: Path) -> None:
    # a 1080i MPEG-TS remuxed to Matroska keeps a block per field; its last frame held 1 s (the second field's
    # block lasts it): the scan took the frame's hold from its first field only (20 ms), and the complete file was
    # called truncated ("header says 1.78 s, but its frames end at 0.80 s") where the same frame in one block passes
    path = tmp_path / "held.mkv"
    with av.open(str(_clip(tmp_path))) as raw, av.open(str(path), "w", format="matroska") as c:
        s = c.add_stream_from_template(raw.streams.video[0])  # (its SPS and PPS as the track's)
        s.codec_context.framerate = Fraction(50)  # (a DefaultDuration, so that the muxer writes the last block's duration)
        s.time_base = tb = Fraction(1, 1000)
        for k, p in enumerate(p for p in raw.demux(video=0) if p.size):
            p.stream, p.time_base, p.pts, p.dts, p.is_keyframe = s, tb, 20 * k, 20 * k, k == 0
            p.duration = 1000 if k == 2 * N - 1 else 20
            c.mux(p)
    meta = probe(path)
    assert (meta.frames, round(meta.duration, 3)) == (N, 1.78)


@pytest.mark.parametrize("drop", [(5, 7), (1, 3), (9, 11, 13, 15)])
def test_fields_unmatched_in_a_row_without_timestamps_are_an_error(tmp_path: Path, drop: tuple[int, ...]) -> None:
    # two or more fields in a row without their pairs: FFmpeg's decoder then shows a field alone, and may show its
    # frame twice (a field decoded into a new picture after the one shown): 8 frames that lost frame 2's and 3's
    # bottom fields came out as 7 (frame 4 twice) where the scan counted 6, and the reader's count gave 6 frames, the
    # last one never, with no error. With timestamps each frame is found by its own; without them the frames cannot
    # be counted, and the read says so
    path = tmp_path / "gaps.h264"
    headers, fields = _fields(8, 4)
    path.write_bytes(headers + b"".join(f for k, f in enumerate(fields) if k not in drop))
    with pytest.raises(VideoDecodeError, match="fields without their pairs"):
        probe(path)
    timed = _mpegts(tmp_path / "gaps.ts", 1, drop, frames=8)
    with av.open(str(timed)) as c:
        want = {f.pts: round(float(f.to_ndarray(format="rgb24").mean()), 1) for f in c.decode(video=0)}
    with VideoReader(timed) as r:
        index = r._order[0]
        assert index.pts is not None
        for i, pts in enumerate(index.pts):  # each frame the decoder shows read as itself; one it does not, an error
            if pts in want:
                assert round(float(r.read([i]).mean()), 1) == want[pts]
            else:
                with pytest.raises(VideoDecodeError, match=f"frame {i} of"):
                    r.read([i])


@pytest.mark.parametrize(("gop", "swap"), [(4, False), (1, True)], ids=["top-first", "same-frame-num-swapped"])
def test_the_two_fields_of_a_packet_are_one_frame(tmp_path: Path, gop: int, swap: bool) -> None:
    # a frame's two fields in one packet (an MP4 or Matroska sample of a frame: the demuxer parses no fields apart):
    # the decoder gives a frame a packet. The pairing read only a packet's first slice: a packet starting with the
    # other parity than the last one's first field, with the same frame_num (here every frame IDR, frame_num 0, every
    # other frame bottom field first), was taken for that field's pair, and 20 frames counted as 10; the unmatched
    # fields' rule (a field of the same parity next) would have dropped every packet's frame
    headers, fields = _fields(N, gop)
    path = tmp_path / "frames.mkv"
    with av.open(str(_clip(tmp_path))) as raw, av.open(str(path), "w", format="matroska") as c:
        s = c.add_stream_from_template(raw.streams.video[0])
        s.time_base = tb = Fraction(1, 1000)
        for k in range(N):
            top, bottom = fields[2 * k], fields[2 * k + 1]
            p = av.Packet((headers if k == 0 else b"") + (bottom + top if swap and k % 2 else top + bottom))
            p.stream, p.time_base, p.pts, p.dts, p.is_keyframe = s, tb, 40 * k, 40 * k, k % gop == 0
            c.mux(p)
    want = _decoded(path)
    assert len(want) == N and probe(path).frames == N and _read_all(path) == want


def test_second_fields_where_the_avcc_record_has_no_sps() -> None:
    # an 'avc3' MP4 sample entry (its avcC record without parameter sets: they come in the samples, as broadcast
    # remuxes write them): the SPS was looked for only in the record, never found, and every field counted a frame
    sps, pps, *fields = field_coded(3).split(b"\x00\x00\x00\x01")[1:]
    avcc = bytes([1, 77, 0, 30, 0xFF, 0xE0, 0])  # no SPS, no PPS
    units = [[sps, pps, fields[0]], *([f] for f in fields[1:])]
    packets = [av.Packet(b"".join(len(u).to_bytes(4, "big") + u for u in us)) for us in units]
    assert [no_frame for _, no_frame in FieldPairs(avcc).frames(packets)] == [False, True] * 3


def _progressive(path: Path, fmt: str, bframes: int = 2) -> Path:
    with av.open(str(path), "w", format=fmt) as c:
        s = c.add_stream("libx264", rate=25)
        s.width, s.height, s.pix_fmt, s.options = 64, 64, "yuv420p", {"x264-params": f"keyint=4:bframes={bframes}"}
        for i in range(9):
            for p in s.encode(av.VideoFrame.from_ndarray(np.full((64, 64, 3), 25 * i, np.uint8), format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


@pytest.mark.parametrize(("fmt", "ext"), [("mp4", "mp4"), ("matroska", "mkv"), ("mpegts", "ts"), ("h264", "h264")])
def test_progressive_h264_reads_no_slice_header(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str,
                                               ext: str) -> None:
    # the common clip (x264, frame_mbs_only_flag 1: no field can come) pays nothing for the field pairing: no slice
    # header is read, and every packet, the flush one included, passes in its order, each a frame
    path = _progressive(tmp_path / f"p.{ext}", fmt)

    def no_parse(*args: object) -> list[tuple[int, bool] | None]:
        raise AssertionError("a slice header was read")

    monkeypatch.setattr("tools.h264_field_pairs.h264_pictures", no_parse)
    assert probe(path).frames == 9
    with av.open(str(path)) as c:
        packets = list(c.demux(video=0))
        pairs = list(FieldPairs(c.streams.video[0].codec_context.extradata).frames(packets))
    assert [p for p, _ in pairs] == packets and not any(n for _, n in pairs) and packets[-1].size == 0


def test_progressive_avc3_reads_no_slice_header(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # an 'avc3' progressive stream (the SPS in its keyframes' samples, none in the avcC record): the SPS is looked
    # for in the packets, and once found to forbid fields no slice header is read
    with av.open(str(_progressive(tmp_path / "p.mp4", "mp4"))) as c:
        extradata = c.streams.video[0].codec_context.extradata or b""
        packets = [(bytes(p), p.is_keyframe) for p in c.demux(video=0) if p.size]
    n = int.from_bytes(extradata[6:8], "big")
    sps = extradata[8:8 + n]
    pps = extradata[8 + n + 3:8 + n + 3 + int.from_bytes(extradata[8 + n + 1:8 + n + 3], "big")]
    in_band = b"".join(len(u).to_bytes(4, "big") + u for u in (sps, pps))
    avc3 = extradata[:5] + b"\xe0\x00"  # no SPS, no PPS
    samples = []
    for data, key in packets:
        samples.append(av.Packet(in_band + data if key else data))
        samples[-1].is_keyframe = key

    def no_parse(*args: object) -> list[tuple[int, bool] | None]:
        raise AssertionError("a slice header was read")

    monkeypatch.setattr("tools.h264_field_pairs.h264_pictures", no_parse)
    assert [(p, n) for p, n in FieldPairs(avc3).frames(samples)] == [(p, False) for p in samples]


@pytest.mark.parametrize("fields_first", [False, True], ids=["progressive-then-fields", "fields-then-progressive"])
def test_an_sps_that_changes_mid_stream(tmp_path: Path, fields_first: bool) -> None:
    # Annex B (a broadcast switching 720p and 1080i): the SPS is read again at each keyframe, so the fields after a
    # progressive SPS pair up and the frames after a field-coded one are not parsed for fields
    progressive = _progressive(tmp_path / "p.h264", "h264").read_bytes()
    path = tmp_path / "switch.h264"
    path.write_bytes(field_coded(8, gop=4) + progressive if fields_first else progressive + field_coded(8, gop=4))
    want = _decoded(path)
    assert len(want) == 17 and probe(path).frames == 17 and _read_all(path) == want


def test_fields_after_an_in_band_sps_of_a_length_prefixed_stream(tmp_path: Path) -> None:
    # a Matroska track stream-copied from such a switch: its avcC record holds the first (progressive) SPS, the
    # field-coded one comes in band at its IDR frame. Only the record's was read: every field after it counted as a
    # frame (25 frames for the decoder's 17), and every read of a second field's timestamp failed
    raw = tmp_path / "switch.h264"
    raw.write_bytes(_progressive(tmp_path / "p.h264", "h264", bframes=0).read_bytes() + field_coded(8, gop=4))
    path = _switch_to_matroska(raw, tmp_path / "switch.mkv")
    want = _decoded(path)
    assert len(want) == 17 and probe(path).frames == 17 and _read_all(path) == want


def _switch_to_matroska(raw: Path, path: Path) -> Path:
    """The raw stream `raw` of 9 progressive frames then field pairs, stream-copied to the Matroska file `path` with
    timestamps (a frame every 40 ms, then a field every 20 ms)."""
    with av.open(str(raw)) as i, av.open(str(path), "w", format="matroska") as o:
        s = o.add_stream_from_template(i.streams.video[0])
        s.time_base = tb = Fraction(1, 1000)
        for k, p in enumerate(p for p in i.demux(video=0) if p.size):
            p.stream, p.time_base, p.pts, p.dts, p.duration = s, tb, 40 * min(k, 9) + 20 * max(k - 9, 0), None, 20
            o.mux(p)
    return path
