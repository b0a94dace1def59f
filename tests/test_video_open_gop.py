"""Clips cut from an open-GOP stream (x264 ``open-gop=1``, x265's default CRA pictures): pictures decoded after the
first keyframe but shown before it (leading B-frames / RASL pictures) reference frames the cut removed."""

from __future__ import annotations

from pathlib import Path

import av
import pytest

from tests.test_video import id_frames, read_ids
from tools.video import VideoDecodeError, VideoReader, read_all_frames

CODECS = {"libx264": ("x264-params", ".h264"), "libx265": ("x265-params", ".hevc")}


def _open_gop(tmp_path: Path, codec: str, frames: int = 40, suffix: str | None = None) -> Path:
    """A raw stream (no timestamps; or a `suffix` container) of `frames` id frames, a keyframe every 8 frames, each
    after the first a non-IDR I (H.264) / CRA (HEVC) picture followed in decode order by the B-frame shown just
    before it."""
    option, raw = CODECS[codec]
    path = tmp_path / f"open{suffix or raw}"
    with av.open(str(path), "w") as c:
        s = c.add_stream(codec, rate=16)
        s.width, s.height, s.pix_fmt = 64, 64, "yuv420p"
        s.options = {option: "open-gop=1:keyint=8:min-keyint=8:bframes=2:b-adapt=0:scenecut=0:log-level=error"}
        for f in id_frames(frames):
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
    return path


def _drop(src: Path, drop: int) -> Path:
    """`src` without its first `drop` packets (decode order), timestamps (if any) from 0."""
    path = src.with_name(f"{src.stem}_cut{drop}{src.suffix}")
    with av.open(str(src)) as i, av.open(str(path), "w") as o:
        si = i.streams.video[0]
        so = o.add_stream_from_template(si)
        packets = [p for p in i.demux(si) if p.size][drop:]
        base = min((p.pts for p in packets if p.pts is not None), default=None)
        for p in packets:
            p.stream = so
            if base is not None:
                p.pts, p.dts = p.pts - base, p.dts - base
            o.mux(p)
    return path


@pytest.mark.parametrize(("codec", "suffix"), [("libx264", None), ("libx265", None), ("libx264", ".avi")])
@pytest.mark.parametrize("drop", [4, 7])
def test_a_raw_open_gop_stream_cut_mid_gop_keeps_each_frames_index(tmp_path, codec, suffix, drop):
    """Decode order I0 ...(6 frames) I8 B7 ...: cut after 4 packets (3 frames of the first GOP left) or right at
    I8, the decoder drops B7 (it references the lost frame 6), which the count from the first keyframe did not
    know: each frame from I8 on came back under the index of the one before it (frame 1 of the cut at I8 showed
    id 9), no error, and the last one "stream ended early". B7 is now counted before the keyframe: a mid-GOP
    error like the first GOP's remnant, and every later frame keeps its own index. So for an AVI, whose timestamps
    (in decode order) the reader does not use either."""
    lead = 4 if drop == 4 else 1  # frames before I8: the first GOP's remnant (decode order) and B7
    path = _drop(_open_gop(tmp_path, codec, suffix=suffix), drop)
    with VideoReader(path) as reader:
        total = reader.meta.frames
        assert total == 40 - drop and reader._order[0].pts is None
        for i in range(lead):  # (the error names the keyframe's own index, which H.264's decoder finds)
            with pytest.raises(VideoDecodeError, match=f"frame {i} of {total} .*mid-GOP.*keyframe \\(frame {lead}\\)"):
                reader.read([i])
        assert read_ids(reader.read([lead, lead + 5, total - 1])) == [8, 13, 39]
        assert read_ids(reader.read(range(lead, total))) == list(range(8, 40))
    with pytest.raises(VideoDecodeError, match=f"frame 0 of {total} .*starts mid-GOP"):
        read_all_frames(path)


def test_an_open_gop_clip_with_timestamps_cut_at_a_keyframe_names_its_leading_frame(tmp_path):
    """With timestamps, the same cut at I8 starts on a keyframe, so no frame was taken to lack its references:
    frame 0 (B7, dropped by the decoder) failed as 'got pts ... instead'. It is now the mid-GOP error, and the
    keyframe and every later frame read."""
    path = _drop(_open_gop(tmp_path, "libx264", suffix=".mkv"), 7)
    with VideoReader(path) as reader:
        assert reader._order[0].pts is not None and reader.meta.frames == 33
        with pytest.raises(VideoDecodeError, match="frame 0 of 33 .*starts mid-GOP.*first keyframe \\(frame 1\\)"):
            reader.read([0])
        assert read_ids(reader.read([1, 2, 32])) == [8, 9, 39]


def _radl(tmp_path: Path, suffix: str = ".hevc") -> Path:
    """24 id frames of closed GOPs (x265: IDR every 8 frames, from the second on decoded before the 2 B-frames shown
    just before it, its decodable leading pictures: RADL); decode order 0 4 2 1 3 5 8 7 6 ..."""
    path = tmp_path / f"closed{suffix}"
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx265", rate=16)
        s.width, s.height, s.pix_fmt = 64, 64, "yuv420p"
        s.options = {"x265-params": "open-gop=0:radl=2:keyint=8:min-keyint=8:bframes=3:b-adapt=0:scenecut=0:"
                                    "log-level=error"}
        for f in id_frames(24):
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
    return path


@pytest.mark.parametrize("drop", [2, 5])
def test_a_raw_closed_gop_hevc_stream_cut_mid_gop_keeps_each_frames_index(tmp_path, drop):
    """A raw HEVC stream of closed GOPs (IDR keyframes with decodable leading pictures, x265 ``radl``) cut mid-GOP:
    decoded with H.264's show_all, FFmpeg's HEVC decoder put out every picture broken (none marked a keyframe), so
    the count never started and every frame, the keyframe's and all after it included, failed (mid-GOP, 'stream
    ended early'). Only H.264 is decoded that way: HEVC's decoder drops the frames before the keyframe."""
    path = _drop(_radl(tmp_path), drop)
    with VideoReader(path) as reader:
        total, lead = reader.meta.frames, reader._order[0].lead
        assert reader._order[0].pts is None and total == 24 - drop and lead > 0
        with pytest.raises(VideoDecodeError, match=f"frame 0 of {total} .*mid-GOP"):
            reader.read([0])
        assert read_ids(reader.read(range(lead, total))) == list(range(24 - total + lead, 24))


@pytest.mark.parametrize("suffix", [".hevc", ".mkv"])
def test_decodable_leading_pictures_of_the_first_keyframe_are_read(tmp_path, suffix):
    """Cut right at an IDR with RADL pictures (shown before it, referencing only it): the decoder gives them, and
    they were read before open-GOP leading frames were counted, which took them for RASL ones (lost references)
    and refused frames 0 and 1 as mid-GOP. A cut one frame earlier (that frame's references lost, the decoder
    drops it) keeps them in the lead, as a count of the decoder's output must, with timestamps too: the reader
    falls back from them to the count with the same lead."""
    src = _radl(tmp_path, suffix)
    path = _drop(src, 6)  # decode order 8 6 7 ...
    with VideoReader(path) as reader:
        assert reader._order[0].lead == 0
        assert read_ids(reader.read([0, 1, 2, 17])) == [6, 7, 8, 23]
    if suffix == ".mkv":
        with VideoReader(_drop(src, 5)) as reader:  # 5 8 6 7 ...: frame 5 shown before 6, its references lost
            assert reader._order[0].lead == 3
            with pytest.raises(VideoDecodeError, match="frame 1 of 19 .*mid-GOP"):
                reader.read([1])
            assert read_ids(reader.read([3, 4])) == [8, 9]
