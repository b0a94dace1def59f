"""Reads that must keep frame identity: ``read_all_frames`` after a dropped frame, and the first read of a
clip that does not start on a keyframe."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import av
import pytest

from tests.test_video import id_frames, read_ids, write_raw
from tests.test_video_containers import drop_decoded_frame
from tools.video import VideoDecodeError, VideoReader, read_all_frames, read_frames


def test_read_all_frames_fails_on_a_frame_the_decoder_drops(tmp_path, monkeypatch):
    """``read_all_frames(max_frames=k)`` numbered the decoder's output: with frame 12 dropped it returned
    frame 13 as frame 12 (and every later one shifted), no error. Now it maps timestamps like ``read``."""
    path = write_raw(tmp_path / "d.mp4", id_frames(24), gop=24)
    drop_decoded_frame(monkeypatch, 12)
    assert read_ids(read_all_frames(path, max_frames=12)) == list(range(12))
    for limit in (16, None):
        with pytest.raises(VideoDecodeError, match="frame 12 of 24 could not be decoded"):
            read_all_frames(path, max_frames=limit)
    assert read_all_frames(path, max_frames=0).shape == (0, 64, 64, 3)


def _cut_mid_gop(tmp_path: Path, drop: int = 5, src: Path | None = None, suffix: str = ".mp4") -> Path:
    """An MP4 (or `suffix`) whose first `drop` packets (decode order) are gone, timestamps from 0: it starts
    mid-GOP, on B-frames that reference the lost frames, and its first keyframe is frame 3 (showing id 8)."""
    src = src or write_raw(tmp_path / "src.mp4", id_frames(32), gop=8)
    path = tmp_path / f"midgop_{src.stem}{suffix}"
    with av.open(str(src)) as i, av.open(str(path), "w") as o:
        si = i.streams.video[0]
        so = o.add_stream_from_template(si)
        packets = [p for p in i.demux(si) if p.size][drop:]
        base = min(p.pts for p in packets)
        for p in packets:
            p.stream, p.pts, p.dts = so, p.pts - base, p.dts - base
            o.mux(p)
    return path


def test_the_first_read_of_a_clip_cut_mid_gop_needs_no_seek_back(tmp_path):
    """The first read rewinds the scan's demuxer by a seek to the first frame, which MP4 refuses when no
    keyframe lies at or before it (EPERM): that read failed ('seeking to the start failed') and the same
    read then succeeded on a fresh demuxer. It now reopens the demuxer itself."""
    path = _cut_mid_gop(tmp_path)
    with VideoReader(path) as reader:
        assert reader._order[0].keyframes[0] == 3
        first = read_ids(reader.read([10, 20]))
        assert first == read_ids(reader.read([10, 20])) == [15, 25]
    assert read_ids(read_frames(path, [3, 26])) == [8, 31]
    assert read_ids(read_frames(path.read_bytes(), [3])) == [8]


@pytest.mark.skipif(not Path("/proc/self/task").is_dir() or (os.cpu_count() or 1) < 2,
                    reason="counts the process's native threads on a multi-core Linux machine")
def test_rgb_conversion_starts_no_swscale_slice_threads(tmp_path):
    """PyAV's default swscale context starts one slice thread per CPU and synchronises them for every
    frame (~130 us of CPU per 32x32 frame, 2 us without); the worker pool already runs a clip per core,
    so conversions run single-threaded (tools/video_reformat.py). A fresh thread's first conversion
    (a new reformatter, kept while the thread lives) must not add native threads to the process."""
    path = write_raw(tmp_path / "c.mp4", id_frames(4), gop=4)
    with av.open(str(path)) as container:
        frame = next(container.decode(video=0))
    reader = VideoReader(path)
    converted, done = threading.Event(), threading.Event()
    shapes = []

    def convert() -> None:
        shapes.append(reader.to_rgb(frame).shape)
        shapes.append(reader.to_rgb(frame, (32, 32)).shape)
        converted.set()
        done.wait(10)

    before = set(os.listdir("/proc/self/task"))
    worker = threading.Thread(target=convert)
    worker.start()
    try:
        assert converted.wait(10)
        # threads that appeared meanwhile, less Python's own (the worker; any other test's): native ones are left.
        # Identities, not counts: a thread of an earlier test that ended meanwhile hid the worker in a count.
        python = {str(t.native_id) for t in threading.enumerate()}
        native = set(os.listdir("/proc/self/task")) - before - python
    finally:
        done.set()
        worker.join()
    assert shapes == [(64, 64, 3), (32, 32, 3)]
    assert str(worker.native_id) not in before and native == set(), native  # the worker, nothing else


def test_frames_before_the_first_keyframe_of_a_clip_cut_mid_gop_are_errors_not_gray(tmp_path):
    """MPEG-4 part 2 decodes P-frames whose keyframe was cut off on gray references: frames 0-4 came back as
    gray frames (no error), and frame 5 of a B-frame clip as a blend of gray. Frames before the first keyframe of
    a clip whose first packet is no keyframe are now a VideoDecodeError, on the first read and every later one,
    the reader keeps seeking, and frames from the keyframe on decode."""
    for max_b, key in ((0, 5), (2, 6)):
        src = tmp_path / f"src{max_b}.mp4"
        with av.open(str(src), "w") as c:
            s = c.add_stream("mpeg4", rate=16)
            s.width, s.height, s.pix_fmt = 64, 64, "yuv420p"
            s.codec_context.gop_size, s.codec_context.max_b_frames = 8, max_b
            for f in id_frames(24):
                c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
            c.mux(s.encode())
        path = _cut_mid_gop(tmp_path, drop=3, src=src)
        with VideoReader(path) as reader:
            assert reader._order[0].keyframes[0] == key
            for _ in range(2):
                for i in range(key):
                    with pytest.raises(VideoDecodeError, match=f"frame {i} of .*starts mid-GOP"):
                        reader.read([i])
            assert reader._seeks
            assert read_ids(reader.read([key, 20])) == [key + 3, 23]
        with pytest.raises(VideoDecodeError, match="frame 0 of .*starts mid-GOP"):
            read_all_frames(path)


@pytest.mark.parametrize("codec", ["mpeg4", "libx264"])
def test_a_clip_cut_mid_gop_without_any_keyframe_is_an_error_not_gray_frames(tmp_path, codec):
    """With no keyframe after the cut (one 24-frame GOP, its keyframe cut off), no frame was treated as
    lacking its references: MPEG-4 part 2 returned its P-frames built on gray references as frames 0-20, no
    error, and H.264 (which drops them) failed as 'stream ended early'. Both now name the missing keyframe."""
    src = tmp_path / f"src_{codec}.mkv"
    with av.open(str(src), "w") as c:
        s = c.add_stream(codec, rate=16)
        s.width, s.height, s.pix_fmt = 64, 64, "yuv420p"
        s.codec_context.gop_size, s.codec_context.max_b_frames = 100, 0
        s.options = {"sc_threshold": "1000000000"} if codec == "mpeg4" else {"x264-params": "scenecut=0"}
        for f in id_frames(24):
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
    path = _cut_mid_gop(tmp_path, drop=3, src=src, suffix=".mkv")
    with VideoReader(path) as reader:
        assert reader.meta.frames == 21 and reader._order[0].keyframes == ()
        for _ in range(2):
            for i in (0, 5, 20):
                with pytest.raises(VideoDecodeError, match=f"frame {i} of 21 .*starts mid-GOP and has no keyframe"):
                    reader.read([i])
    with pytest.raises(VideoDecodeError, match="frame 0 of 21 .*starts mid-GOP and has no keyframe"):
        read_all_frames(path)


def test_a_raw_h264_stream_cut_mid_gop_keeps_each_frames_index(tmp_path):
    """A raw H.264 stream has no timestamps, so the reader counts the decoder's output; cut mid-GOP, the decoder drops
    the frames before the first keyframe, and every frame came back under the index of the one 3 frames before it
    (frame 0 showed frame 3, id 8), no error, the last 3 frames "stream ended early". The frames before the first
    keyframe (in decode order) are now a mid-GOP VideoDecodeError and the count starts there at the keyframe."""
    path = _cut_mid_gop(tmp_path, suffix=".h264")
    with VideoReader(path) as reader:
        assert reader.meta.frames == 27 and reader._order[0].pts is None
        for i in range(3):
            with pytest.raises(VideoDecodeError, match=f"frame {i} of 27 .*starts mid-GOP"):
                reader.read([i])
        assert read_ids(reader.read([3, 10, 20, 26])) == [8, 15, 25, 31]
    with pytest.raises(VideoDecodeError, match="frame 0 of 27 .*starts mid-GOP"):
        read_all_frames(path)
