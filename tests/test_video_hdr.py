"""An HDR clip (PQ or HLG transfer) is decoded without tone mapping (`tools.video_hdr`): its frames reach the agent
dim, flat and desaturated (an SDR-bright scene's code values squeezed into about 50..150), and nothing said so. The
reader names the transfer (``VideoReader.hdr``) and the run notes it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace
from typing import Literal

import av
import numpy as np
import pytest
from graph_scripts import make_agent, moving_square, run

import tools.video_reader
from tests.test_video import id_frames
from tests.test_video_slices import HVCC
from tools.video import VideoReader, VideoTooLargeError, probe, read_all_frames
from tools.video_hdr import keyframe_hdr

X265 = {"PQ": "smpte2084", "HLG": "arib-std-b67", None: "bt709"}


def _hevc10(path: Path, frames: np.ndarray, hdr: str | None, pix_fmt: str = "yuv420p10le") -> Path:
    primaries = "bt709" if hdr is None else "bt2020"
    matrix = "bt709" if hdr is None else "bt2020nc"
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx265", rate=16)
        s.width, s.height, s.pix_fmt = frames.shape[2], frames.shape[1], pix_fmt
        s.options = {"x265-params": f"colorprim={primaries}:transfer={X265[hdr]}:colormatrix={matrix}:log-level=0"}
        for f in frames:
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
    return path


@pytest.mark.parametrize("name", ["c.mp4", "c.ts", "c.hevc"])
@pytest.mark.parametrize("hdr", ["PQ", "HLG", None])
def test_the_reader_names_an_hdr_transfer(tmp_path: Path, hdr: str | None, name: str) -> None:
    """MP4 states the transfer in its headers; MPEG-TS and a raw HEVC stream only in the bitstream (the SPS)."""
    path = _hevc10(tmp_path / name, id_frames(8), hdr)
    for src in (path, path.read_bytes()):
        with VideoReader(src) as reader:
            assert reader.hdr() == hdr  # (no read yet: the first keyframe where the headers are silent)
        with VideoReader(src) as reader:
            reader.read([3])
            assert reader.hdr() == hdr  # (the read's frame)
    assert read_all_frames(path).shape == (8, 64, 64, 3)


def _h264(path: Path, frames: np.ndarray, pix_fmt: str) -> Path:
    """An H.264 clip whose SPS states PQ (BT.2020 primaries and matrix)."""
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx264", rate=16)
        s.width, s.height, s.pix_fmt = frames.shape[2], frames.shape[1], pix_fmt
        s.codec_context.color_trc, s.codec_context.color_primaries, s.codec_context.colorspace = 16, 9, 9
        for f in frames:
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
    return path


@pytest.mark.parametrize("codec", ["h264 yuv422p10le", "h264 yuv420p", "hevc yuv422p10le", "hevc yuv444p10le"])
def test_any_profile_of_a_ts_clip_is_named(tmp_path: Path, codec: str) -> None:
    """An MPEG-TS clip of H.264 High 4:2:2, 8-bit H.264 or an HEVC range-extension profile (Rext) states its transfer
    in its SPS only, as a 10-bit one does; a list of 10-bit profile names missed them (no note)."""
    name, pix_fmt = codec.split()
    path = tmp_path / "c.ts"
    if name == "h264":
        _h264(path, id_frames(8), pix_fmt)
    else:
        _hevc10(path, id_frames(8), "PQ", pix_fmt)
    with VideoReader(path) as reader:
        assert reader.hdr() == "PQ"


@pytest.mark.parametrize("name", ["pq.mp4", "pq.ts"])
def test_an_hdr_clip_is_noted_in_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Also an MPEG-TS clip, whose transfer the quality step's decoded sample gives (no keyframe decoded for it)."""
    with av.open(str(moving_square(tmp_path / "sq.mp4"))) as c:
        frames = np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])
    keyframes: list[object] = []
    monkeypatch.setattr(tools.video_reader, "keyframe_hdr", lambda *args: keyframes.append(args))
    agent, _ = make_agent("full")
    out = run(agent, _hevc10(tmp_path / name, frames, "PQ"))
    note = [n for n in out["notes"] if "HDR" in n]
    assert note and note[0].startswith("quality: the clip is HDR (PQ)") and note[0] in out["result"].reasons
    assert keyframes == []
    out = run(make_agent("full")[0], moving_square(tmp_path / "sdr.mp4"), run_id="sdr")
    assert not [n for n in out["notes"] if "HDR" in n]


def test_opening_a_10bit_ts_decodes_no_frame(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan reads headers only: an MPEG-TS clip states its transfer only in the bitstream, and decoding its first
    keyframe there cost every VideoReader (every request of the tool service) 0.2 s at 1080p, 1-2 s at 4K."""
    path = _hevc10(tmp_path / "c.ts", id_frames(8), "PQ")
    created: list[tuple[object, ...]] = []
    real = av.CodecContext

    class Counting:
        @staticmethod
        def create(codec: str, mode: Literal["r", "w"] | None = None) -> av.CodecContext:
            created.append((codec, mode))
            return real.create(codec, mode)

    monkeypatch.setattr(av, "CodecContext", Counting)
    keyframes: list[object] = []
    real_keyframe_hdr = tools.video_reader.keyframe_hdr

    def counting_keyframe_hdr(stream: av.video.stream.VideoStream, packets: Iterable[av.Packet], *,
                              annex_b: bool = False) -> str | None:
        keyframes.append(stream)
        return real_keyframe_hdr(stream, packets, annex_b=annex_b)

    monkeypatch.setattr(tools.video_reader, "keyframe_hdr", counting_keyframe_hdr)
    for src in (path, path.read_bytes()):
        assert probe(src).frames == 8
    assert created == [] and keyframes == []
    with VideoReader(path) as reader:  # asked before any read: its first keyframe, once
        assert keyframes == []
        assert reader.hdr() == "PQ" and reader.hdr() == "PQ" and len(keyframes) == 1
    with VideoReader(path) as reader:  # asked after a read: that read's frame told it
        reader.read([5])
        assert reader.hdr() == "PQ" and len(keyframes) == 1
    with VideoReader(path, decode_limit=64 * 64 * 3 - 1) as reader:  # the keyframe is a decode like any other
        with pytest.raises(VideoTooLargeError):
            reader.hdr()
    assert created == [] and len(keyframes) == 1


def test_a_keyframe_that_does_not_decode_alone_gives_no_transfer() -> None:
    """No note, never a fault: the clip's own reads judge its decoding (its sample decoded, or the run is a fault)."""

    class Packet:
        size, is_keyframe, is_discard = 100, True, False

    class Stream:
        thread_type = "AUTO"
        codec_context = SimpleNamespace(name="mpeg4", extradata=None)  # (no NAL units to read)

        def decode(self, packet: object) -> list[av.VideoFrame]:
            raise av.error.InvalidDataError(22, "Invalid data found when processing input")

    assert keyframe_hdr(Stream(), [Packet()]) is None  # type: ignore[arg-type, list-item]


def test_a_leading_sample_of_parameter_sets_leaves_the_keyframe_transfer_read(tmp_path: Path) -> None:
    """An MP4 whose hvcC record holds no parameter sets (they come in band) led by a sample of the VPS, SPS and PPS
    alone, flagged a keyframe (a phone's codec config written as a sample): the headers state no transfer, and
    ``hdr()`` before any read decoded that sample alone, no frame: None for a PQ clip (a read's frame said PQ)."""
    raw = _hevc10(tmp_path / "h.hevc", id_frames(8), "PQ")
    path = tmp_path / "x.mp4"
    with av.open(str(raw)) as i, av.open(str(path), "w") as o:
        so = o.add_stream_from_template(i.streams.video[0])
        so.codec_context.extradata, so.codec_context.color_trc = HVCC, 2  # (no arrays; transfer unspecified)
        samples: list[tuple[list[bytes], bool]] = []
        for p in (p for p in i.demux(video=0) if p.size):
            units = [u for u in re.split(b"\x00\x00\x00\x01|\x00\x00\x01", bytes(p)) if u]
            if not samples:
                samples.append(([u for u in units if (u[0] >> 1) & 0x3F in (32, 33, 34)], True))
            samples.append((units, p.is_keyframe))
        for n, (units, key) in enumerate(samples):
            packet = av.Packet(b"".join(len(u).to_bytes(4, "big") + u for u in units))
            packet.stream, packet.time_base, packet.pts, packet.dts, packet.is_keyframe = so, Fraction(1, 16), n, n, key
            o.mux(packet)
    with VideoReader(path) as reader:
        assert reader._hdr == (False, None) and reader._order[0].fields == (0,)
        assert reader.hdr() == "PQ"


def test_a_start_trimmed_clip_has_its_keyframe_transfer_read(tmp_path: Path) -> None:
    """An MP4 cut after its first two samples (an edit list: its first keyframe demuxed discard) whose headers state no
    transfer (an hvcC record of no arrays, the sets in band): ``hdr()`` before any read decoded that keyframe alone,
    and FFmpeg dropped its frame as it drops every discarded packet's: None for a PQ clip whose reads say PQ."""
    raw = tmp_path / "h.hevc"
    with av.open(str(raw), "w") as c:
        s = c.add_stream("libx265", rate=16)
        s.width, s.height, s.pix_fmt = 64, 64, "yuv420p10le"
        s.options = {"x265-params": f"colorprim=bt2020:transfer={X265['PQ']}:colormatrix=bt2020nc:bframes=0:keyint=4:"
                                    "log-level=0"}
        for f in id_frames(8):
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
    path = tmp_path / "x.mp4"
    with av.open(str(raw)) as i, av.open(str(path), "w") as o:
        so = o.add_stream_from_template(i.streams.video[0])
        so.codec_context.extradata, so.codec_context.color_trc = HVCC, 2  # (no arrays; transfer unspecified)
        for n, p in enumerate(p for p in i.demux(video=0) if p.size):
            units = [u for u in re.split(b"\x00\x00\x00\x01|\x00\x00\x01", bytes(p)) if u]
            packet = av.Packet(b"".join(len(u).to_bytes(4, "big") + u for u in units))
            packet.stream, packet.time_base, packet.pts, packet.dts = so, Fraction(1, 16), n - 2, n - 2
            packet.is_keyframe = p.is_keyframe
            o.mux(packet)
    with av.open(str(path)) as c:
        assert [(p.is_keyframe, p.is_discard) for p in c.demux(video=0) if p.size][:3] == [(True, True), (False, True),
                                                                                         (False, False)]
    with VideoReader(path) as reader:
        assert reader._hdr == (False, None)
        assert reader.hdr() == "PQ"
    with VideoReader(path) as reader:
        assert reader.read([0]).shape[0] == 1 and reader.hdr() == "PQ"  # (the read's frame)
