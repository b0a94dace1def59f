"""Packets that code no picture (an H.264 / HEVC access unit delimiter, parameter sets or SEI alone): the decoder gives
no frame for them, and the scan counts none."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path
from unittest.mock import ANY

import av
import pytest

import tools.video_feed
import tools.video_reader
from tests.test_video import id_frames, read_ids, write_elementary, write_raw
from tests.test_video_edits import _counting
from tests.test_video_open_gop import _drop, _open_gop
from tools.hevc_output import hvcc_units
from tools.video import VideoDecodeError, VideoReader
from tools.video_slices import codes_no_picture

N = 40
AUD = {"libx264": b"\x00\x00\x00\x01\x09\xf0", "libx265": b"\x00\x00\x00\x01\x46\x01\x50"}


def _with_trailing_aud(tmp_path: Path, codec: str, params: str = "keyint=8:log-level=error") -> Path:
    raw = write_elementary(tmp_path / "r.bin", codec, params, N)
    path = tmp_path / ("aud.h264" if codec == "libx264" else "aud.hevc")
    path.write_bytes(raw.read_bytes() + AUD[codec])
    return path


def _to_mp4(src: Path, dest: Path, extra: dict[int, bytes] | None = None, skip: int = 0) -> Path:
    """`src`'s packets, the delimiter's own included, as MP4 samples (length-prefixed, with timestamps in decode
    order: `src` has no B-frames); `extra`: Annex B data given a sample of its own before packet `at`, by `at`;
    `skip`: samples shifted before 0 (a stream copy cut after them: an edit list, the GOP before it demuxed discard)."""
    with av.open(str(src)) as c, av.open(str(dest), "w") as out:
        stream = out.add_stream_from_template(c.streams.video[0])
        packets = [p for p in c.demux(video=0) if p.size]
        for at, data in sorted((extra or {}).items(), reverse=True):
            packets.insert(at, av.Packet(data))
        for i, packet in enumerate(packets):
            packet.stream, packet.time_base = stream, Fraction(1, 16)
            packet.pts, packet.dts, packet.duration = i - skip, i - skip, 1
            out.mux(packet)
    return dest


def _elementary(path: Path, height: int, width: int) -> Path:
    """A raw H.264 stream of `N` id frames of `height` x `width`, without B-frames, a keyframe every 30."""
    with av.open(str(path), "w", format="h264") as c:
        s = c.add_stream("libx264", rate=16)
        s.width, s.height, s.pix_fmt = width, height, "yuv420p"
        s.options = {"x264-params": "keyint=30:bframes=0:log-level=error"}
        for f in id_frames(N, height, width):
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
    return path


@pytest.mark.parametrize(("alone", "at", "size"), [
    ("parameter sets", 0, (368, 640)), ("delimiter", 20, (64, 64)), ("delimiter", 20, (368, 640))])
def test_a_sample_of_no_picture_damages_no_frame(tmp_path, alone, at, size):
    """FFmpeg's H.264 decoder fails a packet of no picture ("no frame!"), which the reads took for corrupt data: the
    frames decoded after it up to the next keyframe failed; with frame threads (from 640x360 on) the error comes some
    packets later, and the frames before it failed too. A sample of the SPS and PPS alone leads some phones' MP4s
    (the encoder's codec config written as a sample): no frame of the first GOP could be read."""
    raw = _elementary(tmp_path / "r.h264", *size)
    units = [u for u in re.split(b"\x00\x00\x00\x01|\x00\x00\x01", raw.read_bytes()) if u]
    data = b"".join(b"\x00\x00\x00\x01" + u for u in units if u[0] & 0x1F in (7, 8)) if alone == "parameter sets" \
        else AUD["libx264"]
    path = _to_mp4(raw, tmp_path / "x.mp4", {at: data})
    with av.open(str(path)) as c:  # the premise: a sample of its own, which the decoder fails
        assert len([p for p in c.demux(video=0) if p.size]) == N + 1
    with VideoReader(path) as reader:
        assert reader.meta.frames == N
        assert read_ids(reader.read(range(N))) == list(range(N))
        assert read_ids(reader.read([25, 5, 39])) == [25, 5, 39]


@pytest.mark.parametrize("size", [(64, 64), (368, 640)])
def test_a_sample_of_no_picture_an_edit_list_discards_damages_no_frame(tmp_path, size):
    """A delimiter sample in the GOP an edit list cuts (demuxed discard, decoded, its frames dropped): joined to no
    packet (a packet made here cannot take the discard flag), the decoder failed it alone ("no frame!"), and every
    frame up to the next keyframe (frame 30) failed as damaged."""
    path = _to_mp4(_elementary(tmp_path / "r.h264", *size), tmp_path / "x.mp4", {5: AUD["libx264"]}, skip=11)
    with av.open(str(path)) as c:  # the premise: the delimiter's sample demuxed discard, before a discarded frame
        packets = [p for p in c.demux(video=0) if p.size]
        assert [(p.size, p.is_discard) for p in packets[5:7]] == [(6, True), (packets[6].size, True)]
    with VideoReader(path) as reader:
        assert reader.meta.frames == N - 10
        assert read_ids(reader.read(range(N - 10))) == list(range(10, N))
        assert read_ids(reader.read([25, 5])) == [35, 15]
        assert [i for i, _ in reader.iter_frames()] == list(range(N - 10))


@pytest.mark.parametrize("codec", ["libx264", "libx265"])
def test_a_raw_stream_ending_in_a_delimiter_alone_has_no_frame_for_it(tmp_path, codec):
    """FFmpeg's parser gives a raw stream's trailing access unit delimiter its own packet. The scan counted it as a
    frame (41 for 40), and the frames the decoder held when it failed that packet (H.264) could not be read."""
    path = _with_trailing_aud(tmp_path, codec)
    with av.open(str(path)) as c:  # the premise: a packet of its own
        assert bytes([p for p in c.demux(video=0) if p.size][-1]) == AUD[codec]
    with VideoReader(path) as reader:
        assert reader._order[0].pts is None
        assert reader.meta.frames == N
        assert read_ids(reader.read(range(30, N))) == list(range(30, N))


def test_an_mp4_sample_of_a_delimiter_alone_is_no_frame(tmp_path):
    """With timestamps: the sample's timestamp was counted as a frame the decoder never gives (frame 40 of 41)."""
    path = _to_mp4(_with_trailing_aud(tmp_path, "libx264", "keyint=8:bframes=0:log-level=error"), tmp_path / "aud.mp4")
    with VideoReader(path) as reader:
        assert reader._order[0].pts is not None
        assert reader.meta.frames == N
        assert read_ids(reader.read([0, 17, N - 1])) == [0, 17, N - 1]


AVCC = b"\x01\x64\x00\x0a\xff"  # an avcC record's head: 4-byte NAL lengths
HVCC_0 = bytes([0, 1, 0x60]) + bytes(18) + b"\x0f\x00"  # an hvcC record of configurationVersion 0 (FFmpeg: hvcC)
SLICE_320 = b"\x02\x01" + bytes(range(1, 255)) + bytes(range(1, 65))  # an HEVC TRAIL_R slice of 0x140 bytes


@pytest.mark.parametrize(("data", "codec", "extradata", "expected"), [
    (b"\x00\x00\x00\x01\x09\xf0", "h264", None, True),  # an AUD
    (b"\x00\x00\x01\x09\xf0\x00\x00\x01\x06\x05\x01\x80", "h264", None, True),  # AUD + SEI
    (b"\x00\x00\x01\x09\xf0\x00\x00\x01\x65\x88", "h264", None, False),  # AUD + IDR slice
    (b"\x00\x00\x01\x41\x9a", "h264", None, False),  # a slice
    (b"\x00\x00\x01\x00\x9a", "h264", None, False),  # NAL type 0 (unspecified: a corrupt header?) is not known empty
    (b"\x9a\x9b\x9c", "h264", None, False),  # no start code: does not parse
    (b"", "h264", None, False),
    (b"\x00\x00\x00\x02\x09\xf0", "h264", AVCC, True),
    (b"\x00\x00\x00\x02\x09\xf0\x00\x00\x00\x02\x65\x88", "h264", AVCC, False),
    (b"\x00\x00\x00\x09\x09\xf0", "h264", AVCC, False),  # a length past the end
    (b"\x00\x02\x09\xf0\x00\x02\x06\x80", "h264", AVCC[:4] + b"\xfd", True),  # 2-byte lengths: AUD + SEI
    (b"\x02\x09\xf0\x02\x41\x9a", "h264", AVCC[:4] + b"\xfc", False),  # 1-byte lengths: AUD + a slice
    (b"\x00\x00\x00\x02\x09\xf0\x00", "h264", AVCC, False),  # bytes left over
    (b"\x00\x00\x01\x46\x01\x50", "hevc", None, True),  # HEVC AUD
    (b"\x00\x00\x01\x46\x01\x50\x00\x00\x01\x02\x01\xd0", "hevc", None, False),  # + a TRAIL_R slice
    (b"\x00\x00\x01\x09\xf0", "mpeg4", None, False),  # another codec
    (len(SLICE_320).to_bytes(4, "big") + SLICE_320, "hevc", HVCC_0, False),  # (its length 00 00 01 40: no start code
    # and a VPS header)
    (b"\x00\x00\x01\x09\xf0\x00\x00\x01\x06" + bytes(range(1, 250)) * 40, "h264", None, True),  # past the head
    (b"\x00\x00\x01\x09\xf0\x00\x00\x01\x06" + bytes(range(1, 250)) * 40 + b"\x00\x00\x01\x65\x88", "h264", None,
     False),  # a slice past the head
    (b"\x00\x00\x01\x09\xf0\x00\x00\x01\x06" + bytes(range(1, 250)) * 40 + b"\x00\x00\x01", "h264", None, False),
])
def test_codes_no_picture(data, codec, extradata, expected):
    assert codes_no_picture(data, codec, extradata) is expected


@pytest.mark.parametrize("counting", [False, True])
def test_a_leading_sample_of_parameter_sets_is_not_the_first_keyframe(tmp_path, counting):
    """An HEVC clip cut at a CRA keyframe (its leading B-frame, frame 0, references the lost GOP: the decoder drops
    it) led by a sample of the VPS, SPS and PPS alone flagged a keyframe, at the clip's first timestamp (a phone's
    codec config written as a sample). The scan took that sample for the first keyframe: the frame shown before the
    CRA was no lead (0, not 1), frame 0 failed as 'got pts ... instead' and, counting the output, frame 1 on as
    dropped (a picture packet that gives no frame)."""
    src = _drop(_open_gop(tmp_path, "libx265", suffix=".mkv"), 7)
    path = tmp_path / "ps.mkv"
    with av.open(str(src)) as i, av.open(str(path), "w") as o:
        si = i.streams.video[0]
        so = o.add_stream_from_template(si)
        packets = [p for p in i.demux(si) if p.size]
        sets = av.Packet(b"".join(len(u).to_bytes(4, "big") + u for u in hvcc_units(si.codec_context.extradata)))
        sets.pts, sets.time_base, sets.is_keyframe = min(p.pts for p in packets), packets[0].time_base, True
        for p in [sets, *packets]:
            p.stream = so
            o.mux(p)
    with VideoReader(path) as reader:
        assert reader.meta.frames == 33 and reader._order[0].fields == (0,) and reader._order[0].lead == 1
        if counting:
            _counting(reader)
        with pytest.raises(VideoDecodeError, match="frame 0 of 33 .*starts mid-GOP"):
            reader.read([0])
        assert read_ids(reader.read([1, 2, 32])) == [8, 9, 39]


def test_a_leading_sample_of_parameter_sets_leaves_the_slice_count_read(tmp_path):
    """The scan counts the slices of the first packet, a keyframe, to pick the decoder's threads (an HEVC clip of
    several slices decodes faster with slice threads): a leading sample of the parameter sets alone, flagged a
    keyframe, was that packet, of no slice: the count was unknown."""
    raw = write_elementary(tmp_path / "r.hevc", "libx265", "ctu=16:slices=4:keyint=8:log-level=error", 16)
    path = tmp_path / "x.mkv"
    with av.open(str(raw)) as i, av.open(str(path), "w") as o:
        si = i.streams.video[0]
        so = o.add_stream_from_template(si)
        packets = [p for p in i.demux(si) if p.size]
        units = [u for u in re.split(b"\x00\x00\x00\x01|\x00\x00\x01", bytes(packets[0])) if u]
        sets = av.Packet(b"".join(b"\x00\x00\x00\x01" + u for u in units if (u[0] >> 1) & 0x3F in (32, 33, 34)))
        sets.is_keyframe = True
        for n, p in enumerate([sets, *packets]):
            p.stream, p.time_base, p.pts, p.dts = so, Fraction(1, 16), max(n - 1, 0), max(n - 1, 0)
            o.mux(p)
    with VideoReader(path) as reader:
        assert reader._order[0].fields == (0,) and reader.meta.frames == 16
        assert reader._order[0].slices == 4


def test_a_sample_of_no_picture_holds_no_read_decoding_on(tmp_path, monkeypatch):
    """With frame threads a read decodes on until every frame decoded before the one it handed out came out
    (``DamageWatch``): the delimiter's tag, carried by the next packet, never came out, so a read of frame 22 after
    the delimiter sample decoded every frame to the clip's end (24 frames for 7)."""
    raw = _elementary(tmp_path / "r.h264", 368, 640)
    decoded: list[int] = []
    real = VideoReader._frames_fed

    def counted(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        for item in real(self, *args, **kwargs):
            decoded.append(item[0].pts)
            yield item

    monkeypatch.setattr(VideoReader, "_frames_fed", counted)
    counts = []
    for extra in (None, {20: AUD["libx264"]}):
        decoded.clear()
        with VideoReader(_to_mp4(raw, tmp_path / f"x{len(counts)}.mp4", extra)) as reader:
            assert read_ids(reader.read([22])) == [22]
        counts.append(len(decoded))
    assert counts[1] == counts[0] < 20


def test_a_start_trimmed_clip_has_its_slice_count_read(tmp_path):
    """An MP4 whose edit list starts at frame 11 (a stream copy cut there): FFmpeg demuxes the keyframe before it (frame
    8) marked discard. The scan counted the slices of the first packet it kept only if that was a keyframe: the count
    was unknown, and the 4-slice HEVC clip decoded with frame threads, not the faster slice threads."""
    raw = write_elementary(tmp_path / "r.hevc", "libx265", "ctu=16:slices=4:keyint=8:bframes=0:log-level=error", 30)
    path = tmp_path / "late.mp4"
    with av.open(str(raw)) as i, av.open(str(path), "w") as o:
        so = o.add_stream_from_template(i.streams.video[0])
        for n, p in enumerate(p for p in i.demux(video=0) if p.size):
            p.stream, p.time_base, p.pts, p.dts, p.duration = so, Fraction(1, 16), n - 11, n - 11, 1
            o.mux(p)
    with av.open(str(path)) as c:  # the case: a keyframe and the packets after it demuxed discard, then a kept
        # packet that is no keyframe (FFmpeg 8.1.2 discards 3, frames 8-10; 8.1.3, PyAV 18.1.1, maps the edit a frame
        # earlier and discards 4)
        packets = [(p.is_discard, p.is_keyframe) for p in c.demux(video=0) if p.size]
    kept = [discard for discard, _ in packets].index(False)
    assert kept >= 3 and packets[0] == (True, True) and not packets[kept][1], packets[:6]
    with VideoReader(path) as reader:
        assert reader._order[0].primed and reader._order[0].slices == 4
        assert read_ids(reader.read(range(19))) == list(range(11, 30))


def test_a_kept_sample_of_no_picture_a_discarded_frame_carries_holds_no_read(tmp_path, monkeypatch):
    """An MP4 with B-frames trimmed at frame 11 (edit list): a delimiter sample kept (its time after the edit's start)
    between two pictures demuxed discard is fed at the head of the next one, whose frame is dropped. Its tag was
    counted on that packet and never came out, and the damage check, waiting for it, had the read of frame 0 decode
    on to the end of the clip (41 packets, frame threads) where one with the delimiter discarded too decodes 19."""
    src = write_raw(tmp_path / "b.mp4", id_frames(40, 368, 640), gop=30)
    path = tmp_path / "x.mp4"
    with av.open(str(src)) as c, av.open(str(path), "w") as out:
        si = c.streams.video[0]
        stream = out.add_stream_from_template(si)
        packets = [p for p in c.demux(si) if p.size]
        frame = int(1 / 16 / si.time_base)
        aud = av.Packet((len(AUD["libx264"]) - 4).to_bytes(4, "big") + AUD["libx264"][4:])
        aud.time_base, aud.dts, aud.pts = si.time_base, packets[4].dts + 1, 11 * frame + frame // 2
        packets.insert(5, aud)
        for p in packets:
            p.stream, p.pts, p.dts = stream, p.pts - 11 * frame, p.dts - 11 * frame
            out.mux(p)
    with av.open(str(path)) as c:  # the premise: the delimiter kept between two pictures discarded
        assert [(p.size, p.is_discard) for p in c.demux(video=0) if p.size][4:7] == [(ANY, True), (6, False),
                                                                                     (ANY, True)]
    fed: list[bool] = []
    real = tools.video_feed.fed_with_pictures

    def counted(*args):  # noqa: ANN002, ANN202
        for item in real(*args):
            fed.append(item[2])
            yield item

    monkeypatch.setattr(tools.video_feed, "fed_with_pictures", counted)
    with VideoReader(path) as reader:
        assert reader.meta.frames == 29 and reader._order[0].fields == (0,) and reader._order[0].pts is not None
        assert read_ids(reader.read([0])) == [11]
    assert len(fed) < 30 and sum(fed) == 11  # (not to the end: 41 packets, 11 discarded)
