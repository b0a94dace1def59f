"""An MPEG-TS file cut inside a transport packet is truncated (`tools.mpegts_tail`)."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from tests.test_video import id_frames, read_ids
from tests.test_video_short_packets import _gradient_clip
from tools.mpegts_tail import ends_inside_packet
from tools.video import VideoDecodeError, probe, read_all_frames


def _write_ts(path: Path, m2ts: bool = False) -> Path:
    with av.open(str(path), "w", format="mpegts", options={"mpegts_m2ts_mode": "1"} if m2ts else {}) as c:
        s = c.add_stream("libx264", rate=16)
        s.width, s.height, s.pix_fmt = 64, 64, "yuv420p"
        for f in _gradient_clip():
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
    return path


@pytest.mark.parametrize("cut", [10, 100, 187, 800])
def test_a_transport_stream_cut_inside_a_packet_is_truncated(tmp_path: Path, cut: int) -> None:
    """Was: 39 (or fewer) frames, the last of them decoded from part of its data (a damaged picture), no error."""
    data = _write_ts(tmp_path / "c.ts").read_bytes()
    full = read_all_frames(data)
    assert full.shape[0] == 40
    with pytest.raises(VideoDecodeError, match="truncated"):
        probe(data[:-cut])
    cut_path = tmp_path / "cut.ts"
    cut_path.write_bytes(data[:-cut])
    with pytest.raises(VideoDecodeError, match="truncated"):
        read_all_frames(cut_path)


def test_whole_packets_read_as_before(tmp_path: Path) -> None:
    """Complete TS and M2TS files, and a TS cut on a packet boundary (no trace: a shorter clip)."""
    ts = _write_ts(tmp_path / "c.ts").read_bytes()
    m2ts = _write_ts(tmp_path / "c.m2ts", m2ts=True).read_bytes()
    assert len(m2ts) % 192 == 0 and not ends_inside_packet(m2ts) and not ends_inside_packet(ts)
    assert np.array_equal(read_all_frames(m2ts), read_all_frames(ts))
    assert probe(ts[: len(ts) - 188 * 20]).frames < 40
    assert ends_inside_packet(ts[:-1]) and ends_inside_packet(m2ts[:-1])


@pytest.mark.parametrize("gop", [None, 1])
def test_a_two_frame_mpegts_clip_opens(tmp_path, gop):
    """FFmpeg's format probe gives up on some tiny MPEG-TS files (a 2-frame clip: 1.5 KB): "cannot be opened as a
    video (not a video file, ...)" for a complete clip, while 1 and 3 frames opened. A file of whole TS packets is
    opened as MPEG-TS when the probe fails."""
    from tools.video import write_video

    path = write_video(tmp_path / "two.ts", id_frames(2), gop=gop)
    for src in (path, path.read_bytes()):
        meta = probe(src)
        assert meta.frames == 2 and read_ids(read_all_frames(src)) == [0, 1]


@pytest.mark.parametrize("extra", [b"\n", b"\r\n", b"\0" * 4, b"\0" * 100, b"junk" * 60],
                         ids=["newline", "crlf", "zeros4", "zeros100", "text"])
def test_a_complete_transport_stream_with_trailing_bytes_reads_whole(tmp_path: Path, extra: bytes) -> None:
    """Bytes after the last whole transport packet that start no packet (a newline, zero padding) were "truncated: it
    ends inside an MPEG-TS packet", a complete clip made ineligible (a Matroska, MP4, AVI or FLV file with the same
    bytes read whole). A cut packet starts with its sync byte; these bytes do not."""
    data = _write_ts(tmp_path / "c.ts").read_bytes()
    assert not ends_inside_packet(data + extra)
    assert read_ids(read_all_frames(data + extra)) == read_ids(read_all_frames(data))
    assert ends_inside_packet(data + data[:100])  # a packet begun and cut: still truncated


def _null_packet(byte_184: int = 0xFF) -> bytes:
    """A TS null packet (PID 0x1FFF: demuxers drop it whatever its payload), its payload byte 184 given."""
    packet = bytearray(b"\x47\x1f\xff\x10" + b"\xff" * 184)
    packet[184] = byte_184
    return bytes(packet)


@pytest.mark.parametrize("extra", [b"\n", b"\r\n", b"\0" * 4])
def test_trailing_bytes_are_read_in_the_packet_size_the_file_starts_with(tmp_path: Path, extra: bytes) -> None:
    """A 188-byte stream with 1 to 4 trailing bytes also lines up as M2TS (192 bytes, a 4-byte timestamp begun) when
    one payload byte, 188 + 192 bytes before its end, is 0x47: its last sync byte is then M2TS's too, and the clip
    was "truncated" (about 1 in 256 such clips). The file's first packets say which size it uses."""
    data = _write_ts(tmp_path / "c.ts").read_bytes() + _null_packet(0x47) + _null_packet() + _null_packet()
    assert not ends_inside_packet(data)
    assert not ends_inside_packet(data + extra)
    assert read_ids(read_all_frames(data + extra)) == read_ids(read_all_frames(data))
    assert ends_inside_packet(data + _null_packet()[:3])  # a packet begun and cut: still truncated


@pytest.mark.parametrize("extra", [b"\n", b"\r\n", b"\0", b"\0" * 3, b"\0" * 4], ids=["newline", "crlf", "zero1",
                                                                                    "zeros3", "zeros4"])
def test_a_complete_m2ts_with_one_to_four_trailing_bytes_reads_whole(tmp_path: Path, extra: bytes) -> None:
    """An M2TS packet starts with a 4-byte arrival timestamp, before its sync byte: 1 to 4 bytes of any value after
    the last whole packet read as a timestamp begun, and a complete clip with a newline or zero padding after it was
    "truncated: it ends inside an MPEG-TS packet". Bytes before the sync byte begin a packet only where they can
    start the timestamp that continues the last packets' clock; the last packet's own header, cut, still does."""
    data = _write_ts(tmp_path / "c.m2ts", m2ts=True).read_bytes()
    assert not ends_inside_packet(data + extra)
    assert read_ids(read_all_frames(data + extra)) == read_ids(read_all_frames(data))
    for kept in range(1, 5):  # the last packet cut 1 to 4 bytes into its timestamp: still truncated
        assert ends_inside_packet(data[:len(data) - 192 + kept])


def test_a_recorders_m2ts_clock_tells_a_cut_timestamp_from_padding(tmp_path: Path) -> None:
    """A recorder's arrival clock steps by varying amounts (FFmpeg's by a constant): bytes that start the next step's
    timestamp are a packet begun, zero padding or a newline is none."""
    ts = _write_ts(tmp_path / "c.ts").read_bytes()
    stamps = [0x2A00_0000 + k * 3000 + (k % 3) * 17 for k in range(len(ts) // 188 + 1)]
    data = b"".join(s.to_bytes(4, "big") + ts[k * 188:(k + 1) * 188] for k, s in enumerate(stamps[:-1]))
    for extra in (b"\0", b"\n", b"\0" * 4):
        assert not ends_inside_packet(data + extra)
    for kept in range(1, 5):
        assert ends_inside_packet(data + stamps[-1].to_bytes(4, "big")[:kept])


def _write_ts_with_audio(path: Path) -> Path:
    """`_write_ts`'s 40 frames with an MP2 audio track (its own PID) muxed alongside."""
    with av.open(str(path), "w", format="mpegts") as c:
        s = c.add_stream("libx264", rate=16)
        s.width, s.height, s.pix_fmt = 64, 64, "yuv420p"
        a = c.add_stream("mp2", rate=48000)
        a.layout = "mono"
        samples = 0
        for k, f in enumerate(_gradient_clip()):
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
            while samples < (k + 1) * 3000:  # 1/16 s of a 440 Hz tone per frame
                tone = np.sin(2 * np.pi * 440 * (samples + np.arange(1152)) / 48000).astype(np.float32)
                frame = av.AudioFrame.from_ndarray((tone * 0.3 * 32767).astype(np.int16)[None], format="s16",
                                                   layout="mono")
                frame.sample_rate, frame.pts, samples = 48000, samples, samples + 1152
                c.mux(a.encode(frame))
        c.mux(s.encode())
        c.mux(a.encode())
    return path


def _packet_of(data: bytes, pid: int) -> bytes:
    """The first transport packet of `pid` in `data` (188-byte packets) that starts no PES."""
    return next(data[at:at + 188] for at in range(0, len(data), 188)
                if (data[at + 1] & 0x1F) << 8 | data[at + 2] == pid and not data[at + 1] & 0x40)


@pytest.mark.parametrize("other", ["pat", "audio", "null"])
def test_a_cut_packet_of_another_pid_is_no_truncated_video(tmp_path: Path, other: str) -> None:
    """Was: a complete video followed by part of a transport packet of another PID (an audio PES's, a PAT's, a null
    packet's) read as "truncated: it ends inside an MPEG-TS packet (the data of its last video frame ... is cut
    short)". Only a cut packet of the video's PID (or one cut before its PID shows) cuts the video."""
    data = _write_ts_with_audio(tmp_path / "a.ts").read_bytes()
    with av.open(str(tmp_path / "a.ts")) as c:
        video, audio = c.streams.video[0].id, c.streams.audio[0].id
    piece = {"pat": data[:100], "audio": _packet_of(data, audio)[:100], "null": _null_packet()[:3]}[other]
    assert piece[0] == 0x47 and ends_inside_packet(data + piece)  # a packet begun and cut
    assert not ends_inside_packet(data + piece, video)
    assert read_ids(read_all_frames(data + piece)) == read_ids(read_all_frames(data))
    assert probe(data + piece).frames == 40
    for cut in (_packet_of(data, video)[:100], piece[:2]):  # the video's own packet, or one whose PID is cut off
        assert ends_inside_packet(data + cut, video)
        with pytest.raises(VideoDecodeError, match="truncated"):
            probe(data + cut)


def test_a_cut_packet_of_another_pid_inside_the_last_video_pes_is_a_truncated_video(tmp_path: Path) -> None:
    """A muxer may put a packet of another PID between two of a video PES's packets (FFmpeg with a mux rate puts a PAT
    / PMT there; broadcast muxers interleave audio so). A file cut inside such a packet ends the video inside its PES:
    the last frame's data is cut short, as a cut on the video's own packet. Was: read as complete since the cut packet
    was another PID's (measured on the 40-frame clip: cut on the boundary of packet 37, inside a PES, then 100 bytes
    of its PAT: read with no error, frame 14 decoded from part of its data)."""
    data = _write_ts(tmp_path / "c.ts").read_bytes()
    with av.open(str(tmp_path / "c.ts")) as c:
        video = c.streams.video[0].id
    packets = [data[at:at + 188] for at in range(0, len(data), 188)]
    pat = next(p for p in packets if (p[1] & 0x1F) << 8 | p[2] == 0)[:100]
    inside = [k for k, p in enumerate(packets)  # the video's packets that continue a PES: the cut lands inside it
              if k >= 20 and (p[1] & 0x1F) << 8 | p[2] == video and not p[1] & 0x40 and p[3] & 0x10]
    assert inside  # (packet 37: cut on its boundary, frame 14 came out decoded from part of its data, no error)
    for k in inside:
        cut = b"".join(packets[:k]) + pat
        assert ends_inside_packet(cut, video)
        for read in (probe, read_all_frames):
            with pytest.raises(VideoDecodeError, match="truncated"):
                read(cut)
