"""Which packets a failed AV1 packet blames: libdav1d decodes on threads of its own and hands back an error up to its
frame delay (8 pictures) after the packet fed, which FFmpeg does not report: the blame takes the packets held."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from tests.encoded_clips import write_rgb_clip
from tests.test_video_concealed import _damaged, _gradient_ids, _zero_a_fifth, frame_threaded_reads
from tools.video import VideoDecodeError, VideoReader


def _av1(path: Path) -> Path:
    """A 40-frame AV1 MP4 (SVT-AV1, a keyframe every 12 frames) of id stripes over a moving gradient."""
    return write_rgb_clip(path, _gradient_ids(40), "libsvtav1", rate=16, options={"g": "12", "preset": "12"})


def test_the_blame_takes_every_packet_held_by_a_decoder_of_its_own_threads():
    from av.codec.context import CodecContext

    from tools.video_threads import FRAME_THREADS, ErrorLag
    ctx = CodecContext.create("libdav1d", "r")
    ctx.thread_type = "SLICE"  # (what the reader asks below 640x360: dav1d threads all the same)
    lag = ErrorLag(ctx)
    for tag in range(40):
        lag.fed(tag)
    assert lag.blame() == (40 - FRAME_THREADS, 39)


@pytest.mark.skipif("libsvtav1" not in av.codecs_available, reason="no SVT-AV1 encoder")
def test_frames_after_a_failed_av1_packet_fail(tmp_path):
    """Packet 13 (decode order) has a fifth of its data zeroed: libdav1d fails it, its error given packets later. The
    blame fell on the packet fed when the error came (none before it), and reads of single frames after packet 13 gave
    frames 14, 16 and 20 unlike the clean clip's, no error. Every frame a read gives is the clean clip's."""
    clean = _av1(tmp_path / "c.mp4")
    bad = _damaged(clean, 13, _zero_a_fifth)
    with av.open(str(clean)) as c:
        plain = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    with VideoReader(bad) as reader:
        for seeks in (True, False):
            reader._seeks = seeks
            for i in range(len(plain)):
                try:
                    frame = reader.read([i])[0]
                except VideoDecodeError:
                    continue
                assert np.array_equal(frame, plain[i]), (seeks, i)


@pytest.mark.skipif("libsvtav1" not in av.codecs_available, reason="no SVT-AV1 encoder")
@pytest.mark.parametrize("packet", [1, 13])
def test_a_key_frame_shown_again_after_a_failed_av1_packet_is_no_keyframe(tmp_path, monkeypatch, packet):
    """Packet 1 (or 13: a temporal unit of hidden frames and the frame after the keyframe) has a fifth of its data
    zeroed; libdav1d on one thread fails it at once. Packets 2, 4 and 8 (or 14, 16, 20) only show a frame that
    packet held: its slot still holds the keyframe, and libdav1d shows that again, a key frame, no error. The watch
    took each for a keyframe, after the damage: single reads gave frames 2, 4 and 8 as the keyframe's picture. A key
    frame the scan does not know as one (no keyframe packet there) now starts nothing: every frame a read gives is the
    clean clip's."""
    frame_threaded_reads(monkeypatch, 1)
    clean = _av1(tmp_path / "c.mp4")
    bad = _damaged(clean, packet, _zero_a_fifth)
    with av.open(str(clean)) as c:
        plain = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    with VideoReader(bad) as reader:
        for seeks in (True, False):
            reader._seeks = seeks
            failed = []
            for i in range(len(plain)):
                try:
                    frame = reader.read([i])[0]
                except VideoDecodeError:
                    failed.append(i)
                    continue
                assert np.array_equal(frame, plain[i]), (seeks, i)
            assert packet in failed and packet + 1 in failed, failed  # (the premise: the damage shows)
