"""MPEG-1 / 2 video asked for frame threads ("AUTO", a large clip's) runs slice threads, its context still saying
FRAME: its decoder is flushable and its results come back with their own packet. Damaged, such a clip still hands out
no frame unlike the clean clip's."""

from __future__ import annotations

import numpy as np
import pytest
from av.codec.context import ThreadType

from tests.test_video_concealed import _damaged, _zero_a_fifth, failed_reads
from tests.test_video_damage_scope import N, _b_frame_clip, _p_as_b
from tools import video_reader, video_scan
from tools.video import VideoDecodeError, VideoReader
from tools.video_feed import flushable


@pytest.fixture
def auto_threads(monkeypatch: pytest.MonkeyPatch) -> list:
    """Every clip opened as a large one is ("AUTO"); the streams the reads open, collected."""
    monkeypatch.setattr(video_scan, "frame_threads", lambda *_: True)
    opened, streams = video_reader.video_stream, []

    def kept(*args):  # noqa: ANN002, ANN202
        stream = opened(*args)
        streams.append(stream)
        return stream

    monkeypatch.setattr(video_reader, "video_stream", kept)
    return streams


def test_mpeg2_asked_for_frame_threads_is_flushable(tmp_path, auto_threads):
    """Its context says FRAME, and flushable read that: a read's settle decoded on instead of flushing (FFmpeg's
    MPEG-1 decoder, the same code, has no frame threads either)."""
    clean = _b_frame_clip(tmp_path / "m.mpg", "mpeg2video")
    with VideoReader(clean) as reader:
        reader.read([2])
    stream = auto_threads[-1]
    assert ThreadType.FRAME in stream.codec_context.thread_type  # (the premise)
    assert flushable(stream)


@pytest.mark.parametrize("seeks", [True, False])
@pytest.mark.parametrize(("packet", "edit", "fails"), [(4, _p_as_b, range(4, 12)), (2, _zero_a_fifth, [1])])
def test_damaged_mpeg2_asked_for_frame_threads_hands_out_only_clean_frames(tmp_path, auto_threads, seeks, packet,
                                                                          edit, fails):
    """MPEG-2 (B-frames, GOP 12) with packet 4's P-frame broken into a B-frame (frames 4-11 wrong) or packet 2's
    B-frame concealed (frame 1 alone): every read, by seeks or from the start, and iter_frames hand out the clean
    clip's frames or fail; the damaged ones fail, the next GOP reads."""
    clean = _b_frame_clip(tmp_path / "m2.mp4", "mpeg2video")
    bad = _damaged(clean, packet, edit)
    with VideoReader(clean) as reader:
        want = reader.read(range(N))
    with VideoReader(bad) as reader:
        reader._seeks = seeks
        failed = failed_reads(reader, want)
        assert set(fails) <= set(failed) and not set(range(12, N)) & set(failed), failed
        assert np.array_equal(reader.read(range(12, 24)), want[12:24])
        with pytest.raises(VideoDecodeError, match="corrupt data"):
            for i, frame in reader.iter_frames():
                assert np.array_equal(reader.to_rgb(frame), want[i]), i
    assert ThreadType.FRAME in auto_threads[-1].codec_context.thread_type  # (the premise)
