"""The end of a clip decoded with frame threads: the end's flush gives the frames the threads hold, and PyAV drops an
error the decoder gives after a frame in one call, with the frames after it (``CodecContext.decode`` keeps what it
has and ends; the drained decoder gives nothing more)."""

from __future__ import annotations

import av
import pytest
from av.codec.context import ThreadType

from tests.test_video import read_ids, write_raw
from tests.test_video_concealed import _gradient_ids, _packets, eight_frame_threads
from tools.video import VideoDecodeError, VideoReader

N = 12


def test_a_frame_whose_reference_the_end_lost_is_an_error(monkeypatch, tmp_path):
    """A 12-frame clip, 8 frame threads (most frames come out in the end's flush): frame 6 concealed and flagged,
    packet 8 (decode order) failing. The flush gave frames 0-5 and stopped on packet 8's error, which PyAV dropped,
    and frame 6 (flag and all) with it: frames 4 and 5, B-frames decoded after frame 6 and shown before it, which
    reference it, came back damaged with no error (the watch took the end for their reference's). They fail now; the
    frames before read, and those lost are errors."""
    eight_frame_threads(monkeypatch)
    clean = write_raw(tmp_path / "c.mp4", _gradient_ids(N), gop=12)
    data, packets = bytearray(clean.read_bytes()), _packets(clean)
    order = sorted(p.pts for p in packets)
    assert [order.index(p.pts) for p in packets][:9] == [0, 1, 3, 2, 6, 4, 5, 8, 7]  # decode order
    p6, p8 = packets[4], packets[8]
    at = p6.pos + p6.size // 2
    data[at:at + p6.size // 2] = bytes(p6.size // 2)  # frame 6 concealed, flagged
    data[p8.pos + 4] = 0x7F  # packet 8's NAL header broken: the decoder fails it
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(bytes(data))
    with av.open(str(bad)) as c:  # the premise: the flush gives 0-5, no flag, no error
        stream = c.streams.video[0]
        stream.thread_type, stream.codec_context.thread_count = "FRAME", 8
        out = [f for p in c.demux(stream) for f in stream.codec_context.decode(p if p.size else None)]
    assert [order.index(f.pts) for f in out] == [0, 1, 2, 3, 4, 5] and not any(f.is_corrupt for f in out)
    with VideoReader(bad) as reader:
        container, stream = reader._decoder(reader._order[0])
        with container:
            assert ThreadType.FRAME in stream.codec_context.thread_type
        assert read_ids(reader.read([0, 1, 2, 3])) == [0, 1, 2, 3]
        for wanted in ([4], [5], [0, 4]):
            with pytest.raises(VideoDecodeError, match=f"frame {wanted[-1]} of {N} could not be decoded: .*near the "
                                                       "end of the clip, where it gave no frame 6"):
                reader.read(wanted)
        with pytest.raises(VideoDecodeError, match=f"frame 7 of {N} could not be decoded"):
            reader.read([7])
