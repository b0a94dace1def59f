"""MPEG-1 / MPEG-2 clips cut at an I picture whose B pictures follow it in decode order but are shown before it: FFmpeg
decodes them after a closed GOP's header (they predict from the I picture alone) and drops them after an open one's."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from tests.test_video import id_frames, read_ids
from tools.video import VideoDecodeError, VideoReader


def _cut_at_second_gop(tmp_path: Path, suffix: str, closed: bool, back: int = 0) -> Path:
    """Frames 7-39 of a 40-frame MPEG-2 stream (I pictures at frames 0 and 9, two B pictures each): the stream cut
    at its second I picture, whose B pictures (frames 7 and 8) then lead. Frames 0-6 are noise and rate-distortion
    mode decisions keep the encoder from predicting frames 7-8 from them, so with ``closed`` set in the GOP header
    (FFmpeg's encoder writes closed GOPs only without leading B pictures) the stream is a valid closed GOP: FFmpeg
    decodes it as the uncut stream. ``back``: packets before the I picture kept too (B pictures of the GOP before:
    frames 5, then 4; a cut mid-GOP)."""
    frames = id_frames(40).copy()
    frames[:7] = np.random.default_rng(0).integers(0, 256, frames[:7].shape, dtype=np.uint8)
    src = tmp_path / "src.m2v"
    with av.open(str(src), "w", format="mpeg2video") as c:
        s = c.add_stream("mpeg2video", rate=16)
        s.width, s.height, s.pix_fmt = 64, 64, "yuv420p"
        s.codec_context.gop_size = 8
        s.options = {"bf": "2", "sc_threshold": "1000000000", "b_strategy": "0", "mbd": "rd"}
        for f in frames:
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
    path = tmp_path / f"cut{suffix}"
    with av.open(str(src)) as i, av.open(str(path), "w") as o:
        si = i.streams.video[0]
        so = o.add_stream_from_template(si)
        so.time_base = Fraction(1, 16)
        packets = [p for p in i.demux(si) if p.size]
        first = next(k for k, p in enumerate(packets) if p.is_keyframe and k)
        assert first == 7  # (I0 P3 B1 B2 P6 B4 B5 I9 B7 B8 ...)
        kept = packets[first - back:]
        shown = sorted(p.pts for p in kept)
        for k, p in enumerate(kept):
            data = bytearray(bytes(p))
            if k == back and closed:
                gop = data.find(b"\x00\x00\x01\xb8")
                data[gop + 7] |= 0x40  # closed_gop, after the 25-bit time code
            q = av.Packet(bytes(data))
            q.time_base, q.dts, q.pts = Fraction(1, 16), k, shown.index(p.pts) + 2  # (in frames, 2 behind for the Bs)
            q.is_keyframe, q.stream = p.is_keyframe, so
            o.mux(q)
    return path


def _counting(reader: VideoReader) -> None:
    """Make `reader` count the decoder's output, as `OutOfOrder` leaves it (timestamps found unusable)."""
    reader._order = (replace(reader._order[0], pts=None, keyframes=(), reorder=None), None)


@pytest.mark.parametrize("suffix", [".m2v", ".ts", ".mpg"])
def test_a_closed_gop_s_leading_b_pictures_read(tmp_path, suffix):
    """They were taken for lost frames (the frames shown before the first keyframe) and refused as a mid-GOP cut,
    both by their timestamps and counting the decoder's output (where the timestamps are found unusable; MPEG-PS
    leaves them off packets)."""
    path = _cut_at_second_gop(tmp_path, suffix, closed=True)
    with av.open(str(path)) as c:
        assert read_ids(np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])) == list(range(7, 40))
    with VideoReader(path) as reader:
        assert reader.meta.frames == 33 and reader._order[0].lead == 0
        assert read_ids(reader.read([1, 0, 20])) == [8, 7, 27]
        _counting(reader)
        assert read_ids(reader.read(range(33))) == list(range(7, 40))


@pytest.mark.parametrize(("suffix", "counting"), [(".m2v", False), (".m2v", True), (".mpg", True)])
def test_an_open_gop_s_leading_b_pictures_are_refused_and_the_rest_read(tmp_path, suffix, counting):
    """FFmpeg drops them: frames 0-1 are a mid-GOP cut's, each later frame keeps its index (no closed GOP taken for
    one). Counting the output of MPEG-PS (no timestamps), the scan's lead left them out: the first frame out (the I
    picture, frame 2) was counted as frame 0, and the drop check, waiting on their packets, refused every frame."""
    path = _cut_at_second_gop(tmp_path, suffix, closed=False)
    with VideoReader(path) as reader:
        assert reader.meta.frames == 33 and reader._order[0].lead == 2
        if counting:
            _counting(reader)
        assert read_ids(reader.read(range(2, 33))) == list(range(9, 40))
        with pytest.raises(VideoDecodeError, match="frame 1 of 33 .*mid-GOP"):
            reader.read([1])


@pytest.mark.parametrize("closed", [True, False])
def test_counting_a_closed_gop_after_a_mid_gop_cut_keeps_each_frames_index(tmp_path, closed):
    """MPEG-PS cut one packet before the I picture: frame 5 (lost: FFmpeg drops it), then frames 7-8 (decoded after
    a closed GOP's header) and the I picture (frame 9) at index 3. The reader, waiting for a keyframe, passes over the
    B pictures that come out first, counting them, and put the I picture at the greater of that count (2) and the
    scan's lead, which left them out (1): frames 9-39 came back as frames 2-32, with no error."""
    path = _cut_at_second_gop(tmp_path, ".mpg", closed=closed, back=1)
    with VideoReader(path) as reader:
        assert reader.meta.frames == 34 and reader._order[0].pts is None and reader._order[0].lead == 3
        assert read_ids(reader.read(range(3, 34))) == list(range(9, 40))
        with pytest.raises(VideoDecodeError, match="frame 2 of 34 .*mid-GOP"):
            reader.read([2])
