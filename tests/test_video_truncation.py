"""Truncated files in containers that declare no frame count (Matroska, WebM, FLV): the header's duration."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from tests.test_video import id_frames, read_ids, write_raw
from tools.mp4_boxes import child_boxes
from tools.video import VideoDecodeError, VideoError, probe, read_all_frames, read_frames


def _write(path: Path, n: int, codec: str = "libx264", audio_s: float = 0.0) -> Path:
    """`n` id frames at 16 fps (keyframe every 8), with `audio_s` seconds of silence as a second stream."""
    with av.open(str(path), "w") as c:
        s = c.add_stream(codec, rate=16)
        s.width, s.height, s.pix_fmt = 64, 64, "yuv420p"
        s.codec_context.gop_size = 8
        if codec == "libvpx":
            s.options = {"deadline": "realtime", "cpu-used": "8"}
        a = c.add_stream("pcm_s16le", rate=8000, layout="mono") if audio_s else None
        for f in id_frames(n):
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
        for k in range(int(audio_s * 10)):
            frame = av.AudioFrame.from_ndarray(np.zeros((1, 800), np.int16), format="s16", layout="mono")
            frame.sample_rate, frame.pts, frame.time_base = 8000, 800 * k, Fraction(1, 8000)
            c.mux(a.encode(frame))
    return path


@pytest.mark.parametrize(("name", "codec"), [("c.mkv", "libx264"), ("c.webm", "libvpx"), ("c.flv", "libx264")])
def test_a_cut_file_is_truncated_not_a_shorter_clip(tmp_path, name, codec):
    """Half of a 3 s clip: its frames were read as a 1.5 s clip (meta.duration still 3 s), no error."""
    full = _write(tmp_path / name, 48, codec)
    assert probe(full).frames == 48 and read_ids(read_all_frames(full)) == list(range(48))
    data = full.read_bytes()
    cut = tmp_path / f"cut_{name}"
    cut.write_bytes(data[: len(data) // 2])
    for call in (lambda: probe(cut), lambda: read_frames(cut, [0]), lambda: probe(cut.read_bytes())):
        with pytest.raises(VideoDecodeError, match=r"truncated file: the video stream's header says 3\.\d+ s"):
            call()


def test_a_longer_audio_track_is_not_missing_video(tmp_path):
    """1 s of video beside 3 s of audio: the file's duration is the audio's; the video's own tag is 1 s."""
    path = _write(tmp_path / "av.mkv", 16, audio_s=3.0)
    with av.open(str(path)) as c:
        assert c.duration / av.time_base > 2.5 and c.streams.video[0].metadata["DURATION"].startswith("00:00:01.0")
    assert probe(path).frames == 16 and read_ids(read_all_frames(path)) == list(range(16))


def test_a_cut_fragmented_mp4_is_truncated_at_probe(tmp_path):
    """A fragmented MP4 (empty_moov) declares no frame count: cut inside a fragment, it probed as 31 frames and
    the read of its last frames (or of all) failed in the decoder. Its last packet is read short (FFmpeg flags
    it corrupt): the file is reported truncated by the probe, as a faststart MP4 cut inside its last frame."""
    full = write_raw(tmp_path / "frag.mp4", id_frames(48), gop=8, options={"movflags": "frag_keyframe+empty_moov"})
    assert probe(full).frames == 48 and read_ids(read_all_frames(full)) == list(range(48))
    data = full.read_bytes()
    cut = tmp_path / "cut_frag.mp4"
    cut.write_bytes(data[: len(data) * 3 // 4])
    for call in (lambda: probe(cut), lambda: read_frames(cut, [0]), lambda: probe(cut.read_bytes())):
        with pytest.raises(VideoDecodeError, match=r"truncated file: the data of its last video packet"):
            call()
    plain = write_raw(tmp_path / "fs.mp4", id_frames(16), options={"movflags": "faststart"}).read_bytes()
    with pytest.raises(VideoDecodeError, match=r"truncated file: the data of its last video packet \(of 16\)"):
        probe(plain[:-3])


def test_a_fragmented_mp4_cut_between_two_frames_is_truncated(tmp_path):
    """Cut where one frame's data ends inside a fragment's mdat, no packet is read short: the clip probed as the
    frames before the cut (48 frames read as 19), no error. The mdat box's size says more data follows."""
    full = write_raw(tmp_path / "frag.mp4", id_frames(48), gop=8, options={"movflags": "frag_keyframe+empty_moov"})
    with av.open(str(full)) as c:
        ends = [p.pos + p.size for p in c.demux(video=0) if p.size]
    data = full.read_bytes()
    cut = tmp_path / "cut_frag.mp4"
    cut.write_bytes(data[: ends[18]])  # frame 18 of the third fragment (frames 16..23)
    for call in (lambda: probe(cut), lambda: read_frames(cut, [0]), lambda: probe(cut.read_bytes())):
        with pytest.raises(VideoDecodeError, match=r"truncated file: its 'mdat' box at byte \d+ declares \d+ "
                           r"bytes, but the file ends \d+ bytes short of them \(frames after the 19 read"):
            call()
    assert probe(data[: ends[23]]).frames == 24  # cut where a fragment ends: a shorter clip, as a player sees it
    boxes = child_boxes(memoryview(data))
    moof_end = sum(len(body) + 8 for _, body in boxes[: [k for k, _ in boxes].index(b"moof", 8) + 1])
    with pytest.raises(VideoDecodeError, match=r"its last fragment's 'moof' box \(at byte \d+\) has no 'mdat' "
                       r"box after it \(frames after the 24 read"):
        probe(data[:moof_end])  # the fourth fragment's moof (ftyp, moov, 3 x moof + mdat before it): read as 24 frames
    for extra in (4, 7):  # a few bytes into the fourth fragment's moof header: read as 24 frames before
        with pytest.raises(VideoDecodeError, match=rf"truncated file: it ends {extra} bytes into the header of a box "
                           r"at byte \d+ \(frames after the 24 read"):
            probe(data[:ends[23] + extra])
    # 1 to 3 bytes of its size field (a 176-byte moof: zero bytes) cannot be told from zero padding: as a cut between
    # two fragments, a shorter clip (`header_start`)
    assert data[ends[23]:ends[23] + 3] == b"\0\0\0" and probe(data[:ends[23] + 3]).frames == 24



@pytest.mark.parametrize("extra", [b"\n", b"\r\n", b"\0" * 4, b"\0" * 7, b"junk", b"\0\0\0\x02moo"])
def test_a_fragmented_mp4_with_a_few_trailing_bytes_that_start_no_box_reads_whole(tmp_path, extra):
    """A complete fragmented MP4 followed by 1 to 7 bytes that cannot begin a box header (a newline, zero padding,
    text) was "truncated: it ends N bytes into the header of a box", a valid clip made ineligible, while 8 such bytes
    passed. Only bytes that can start the header of a box following a fragment (a size under 16 MiB, and of at least
    8 bytes, and a printable type) are a cut one."""
    data = write_raw(tmp_path / "frag.mp4", id_frames(24), gop=8,
                     options={"movflags": "frag_keyframe+empty_moov"}).read_bytes()
    meta = probe(data + extra)
    assert meta.frames == 24
    assert read_ids(read_all_frames(data + extra)) == list(range(24))


@pytest.mark.parametrize("extra", [b"\0", b"\0\0", b"\0" * 3, b"\0\0\x01", b"\0\0\0\x10moo"])
def test_bytes_after_a_closing_mfra_box_are_no_cut_fragment(tmp_path, extra):
    """1 to 3 zero bytes (or a box header begun) after a fragmented MP4 read as a cut header: "truncated: it ends 3
    bytes into the header of a box", the clip ineligible. Where the last box is the ``mfra`` that FFmpeg (PyAV) writes
    when it closes the file, the file's end was written: no fragment follows it, and those bytes are no cut."""
    data = write_raw(tmp_path / "frag.mp4", id_frames(24), gop=8,
                     options={"movflags": "frag_keyframe+empty_moov"}).read_bytes()
    assert child_boxes(memoryview(data))[-1][0] == b"mfra"
    assert probe(data + extra).frames == 24
    assert read_ids(read_all_frames(data + extra)) == list(range(24))


@pytest.mark.parametrize("extra", [b"\0", b"\0\0", b"\0" * 3])
def test_a_few_zero_bytes_after_a_fragmented_mp4_without_mfra_are_no_cut_header(tmp_path, extra):
    """1 to 3 zero bytes after a fragmented MP4 that ends without an ``mfra`` box (``skip_trailer``, DASH / CMAF
    packagers) read as a box header cut short: "truncated: it ends N bytes into the header of a box", a complete clip
    made ineligible, while 4 to 7 zero bytes passed. Zero bytes alone begin no header; a cut there loses only whole
    fragments, as a cut between two fragments does (no trace unless a ``sidx`` or ``mehd`` box says so). A size field
    begun with a non-zero byte is still a cut header."""
    data = write_raw(tmp_path / "frag.mp4", id_frames(24), gop=8,
                     options={"movflags": "frag_keyframe+empty_moov+skip_trailer"}).read_bytes()
    assert child_boxes(memoryview(data))[-1][0] == b"mdat"
    assert probe(data + extra).frames == 24
    assert read_ids(read_all_frames(data + extra)) == list(range(24))
    with pytest.raises(VideoDecodeError, match="bytes into the header of a box"):
        probe(data + b"\0\0\x01")


def test_a_cut_moov_is_a_decode_error_not_an_attribute_error(tmp_path):
    """A moov cut inside its sample description gives FFmpeg a video stream without a codec: PyAV's
    ``codec_context`` is None there, and the probe raised AttributeError instead of a VideoError."""
    data = write_raw(tmp_path / "frag.mp4", id_frames(8), options={"movflags": "frag_keyframe+empty_moov"}).read_bytes()
    failures = []
    moov_end = sum(len(body) + 8 for kind, body in child_boxes(memoryview(data))[:2])  # ftyp, moov
    for cut in range(8, moov_end):
        try:
            probe(data[:cut])
        except VideoError:
            continue
        except Exception as exc:  # noqa: BLE001  (what the test looks for)
            failures.append((cut, type(exc).__name__))
    assert failures == []


@pytest.mark.parametrize(("name", "codec"), [("t.mkv", "libx264"), ("t.webm", "libvpx"), ("t.flv", "flv"),
                                             ("t.mkv", "ffv1")])
def test_a_file_cut_by_a_few_frames_is_truncated(tmp_path, name, codec):
    """A 2 s clip (32 frames at 16 fps) cut before one of its last 6 frames: the header's duration was allowed to
    run up to 0.5 s (8 frames) past the frames, so the cut file read as a shorter clip with no error (its last
    frames silently dropped: a task completed in them read as never done). An x264 clip cut in decode order also
    loses B-frames from the middle, which no duration shows: Matroska's Segment size does (`tools.matroska_tail`)."""
    full = _write(tmp_path / name, 32, codec)
    assert probe(full).frames == 32
    with av.open(str(full)) as c:
        starts = sorted(p.pos for p in c.demux(c.streams.video[0]) if p.size and p.pos is not None and p.pos > 0)
    data = full.read_bytes()
    for pos in starts[-6:]:
        cut = tmp_path / f"cut_{pos}_{name}"
        cut.write_bytes(data[:pos])
        with pytest.raises(VideoDecodeError, match=rf"{cut.name}: truncated file"):
            probe(cut)


@pytest.mark.parametrize("rates", [(16,) * 31, (16,) * 20 + (8,) * 11])
def test_a_complete_matroska_file_is_not_truncated(tmp_path, rates):
    """The tighter tolerance keeps complete clips, constant and variable rate (the last frames held longer)."""
    path = tmp_path / "v.mkv"
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx264", rate=16)
        s.width, s.height, s.pix_fmt, s.codec_context.time_base = 64, 64, "yuv420p", Fraction(1, 1000)
        t = 0
        for k, f in enumerate(id_frames(len(rates) + 1)):
            frame = av.VideoFrame.from_ndarray(f, format="rgb24")
            frame.pts, frame.time_base = t, Fraction(1, 1000)
            c.mux(s.encode(frame))
            t += 1000 // (rates[k] if k < len(rates) else 16)
        c.mux(s.encode())
    assert probe(path).frames == len(rates) + 1
    assert read_ids(read_all_frames(path)) == list(range(len(rates) + 1))


def test_a_faststart_mp4_cut_before_its_first_frame_is_truncated_not_empty(tmp_path):
    """The moov (at the front) declares 12 frames, but the file ends before the first one's data: reported as "video
    stream contains no frames", as for a clip written with none, rather than a truncated file."""
    path = tmp_path / "f.mp4"
    with av.open(str(path), "w", options={"movflags": "faststart"}) as c:
        s = c.add_stream("libx264", rate=16)
        s.width, s.height, s.pix_fmt = 64, 64, "yuv420p"
        for f in id_frames(12):
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
    data = path.read_bytes()
    moov = data.index(b"moov") - 4
    mdat = data.index(b"mdat", moov) + 4
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[:mdat])  # the mdat header, none of its data
    with pytest.raises(VideoDecodeError, match=r"cut\.mp4: truncated file: the container declares 12 samples .*but "
                                               r"only 0 could be read"):
        probe(cut)


@pytest.mark.parametrize("name", ["h.mkv", "h.webm", "h.flv"])
def test_a_last_frame_held_longer_is_not_truncation(tmp_path, name):
    """16 frames 62 ms apart, the last shown for 1 s (its Matroska block duration): the header's 1.93 s ran past
    the frames' end estimated at one frame (0.99 s), and the complete clip was called truncated (ineligible). The
    last frame's own duration, where the demuxer gives it, ends the frames; FLV gives none, but a file as long as
    the size its onMetaData states is whole (`tools.flv_meta`)."""
    path = tmp_path / name
    with av.open(str(path), "w") as c:
        s = c.add_stream("libvpx" if name.endswith("webm") else "libx264", rate=16)
        s.width, s.height, s.pix_fmt, s.codec_context.time_base = 64, 64, "yuv420p", Fraction(1, 1000)
        s.options = {"deadline": "realtime", "cpu-used": "8"} if name.endswith("webm") else {"bf": "0"}
        frames = [av.VideoFrame.from_ndarray(f, format="rgb24") for f in id_frames(16)]
        for k, frame in enumerate(frames + [None]):
            if frame is not None:
                frame.pts, frame.time_base = k * 62, Fraction(1, 1000)
            for packet in s.encode(frame):
                packet.duration = 1000 if packet.pts == 15 * 62 else packet.duration
                c.mux(packet)
    with av.open(str(path)) as c:
        duration = c.duration / av.time_base if name.endswith("flv") else c.streams.video[0].metadata["DURATION"]
        assert str(duration).startswith(("00:00:01.93", "1.93"))
    assert probe(path).frames == 16 and read_ids(read_all_frames(path)) == list(range(16))
    data = path.read_bytes()
    cut = tmp_path / f"cut_{name}"
    cut.write_bytes(data[: len(data) * 3 // 4])
    with pytest.raises(VideoDecodeError, match="truncated file"):
        probe(cut)
