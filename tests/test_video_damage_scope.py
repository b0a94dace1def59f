"""What a decoder's damage reaches: a packet it fails on leaves the reader seeking (a later read far from it seeks
again), and a concealed B-frame of MPEG-2 / MPEG-4 part 2 (no frame references one) fails that frame alone."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from tests.test_video import id_frames, read_ids, write_raw
from tests.test_video_concealed import _damaged, _decode, _flip_middle, _gradient_ids, _packets, _zero_a_fifth
from tools import video_decode
from tools.video import VideoDecodeError, VideoReader

N = 40


def test_a_packet_the_decoder_fails_leaves_the_reader_seeking(tmp_path, monkeypatch):
    """H.264 fails packet 15 (decode order) and gives no frame for it: a read of that frame seeks to its GOP and meets
    the gap. The gap was taken for a seek that missed, and the reader stopped seeking for good: every later read, far
    from the damage too, decoded the clip from its start. The read still fails naming the damage; later reads seek."""
    clean = write_raw(tmp_path / "f.mp4", id_frames(N), gop=8)
    bad = _damaged(clean, 15, _flip_middle)
    lost = sorted(p.pts for p in _packets(clean)).index(_packets(clean)[15].pts)
    seeks: list[int] = []
    real = video_decode.seek_keyframe

    def counted(container, stream, pts, name, src):  # noqa: ANN001, ANN202
        seeks.append(pts)
        return real(container, stream, pts, name, src)

    monkeypatch.setattr(video_decode, "seek_keyframe", counted)
    with VideoReader(bad) as reader:
        assert lost > 8 and reader._order[0].keyframes[:4] == (0, 8, 16, 24)  # the premise: its GOP is seeked to
        with pytest.raises(VideoDecodeError, match=f"frame {lost} of {N} could not be decoded.*corrupt data"):
            reader.read([lost])
        assert seeks
        seeks.clear()
        assert read_ids(reader.read([34, 35])) == [34, 35]
        assert seeks  # (a decode from the start seeks nowhere)


def _b_frame_clip(path: Path, codec: str) -> Path:
    """A 96x96 clip of `_gradient_ids` in `codec` with two B-frames between references, a GOP of 12."""
    with av.open(str(path), "w") as c:
        s = c.add_stream(codec, rate=16)
        s.width, s.height, s.pix_fmt, s.options = 96, 96, "yuv420p", {"bf": "2", "g": "12"}
        for f in _gradient_ids():
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
    return path


@pytest.mark.parametrize(("codec", "file"), [("mpeg2video", "m2.mp4"), ("mpeg4", "m4.avi")])
def test_a_concealed_b_frame_fails_alone_where_none_references_one(tmp_path, codec, file):
    """MPEG-2 / MPEG-4 part 2 with B-frames (GOP 12): packet 2 (decode order: the B-frame shown as frame 1) has a fifth
    of its bytes zeroed; the decoder conceals and flags it, and no frame references a B-frame in these codecs. Frames
    2-11, decoded after it, came back refused as damaged; they read now, and frame 1 alone fails."""
    clean = _b_frame_clip(tmp_path / file, codec)
    bad = _damaged(clean, 2, _zero_a_fifth)
    good, broken = _decode(clean), _decode(bad)
    order = sorted(good)
    assert [order.index(p) for p, (_, flagged) in broken.items() if flagged] == [1]  # the premise: B-frame 1 flagged
    assert [i for i, p in enumerate(order) if not np.array_equal(broken[p][0], good[p][0])] == [1]  # ... alone damaged
    with VideoReader(clean) as reader:
        want = reader.read(range(12))
    with VideoReader(bad) as reader:
        with pytest.raises(VideoDecodeError, match=f"frame 1 of {N} could not be decoded: .*corrupt data in frame 1"):
            reader.read([1])
        for wanted in ([2], [3], [0, 5, 11], list(range(2, 12))):
            assert np.array_equal(reader.read(wanted), want[wanted]), wanted


def _p_as_b(data: bytearray, start: int, size: int) -> None:
    """The MPEG-2 picture header's picture_coding_type (3 bits after the 10-bit temporal_reference) turned from P (2)
    to B (3)."""
    at = start + bytes(data[start:start + size]).find(b"\x00\x00\x01\x00") + 5
    assert (data[at] >> 3) & 7 == 2  # (a P picture)
    data[at] = (data[at] & ~(7 << 3)) | (3 << 3)


def test_a_p_frame_damaged_into_a_b_frame_still_fails_its_gop(tmp_path):
    """MPEG-2 (B-frames, GOP 12): packet 4 (decode order: the P-frame shown as frame 6) has its picture header's coding
    type broken into B. The decoder decodes it as a B-frame, conceals and flags it, and keeps P-frame 3 as the
    reference that frames 7-11 were coded against frame 6: they come out wrong, unflagged. A flagged B-frame failed
    alone, and reads of frames 7-11 gave those wrong pictures with no error. It fails alone only when a frame decoded
    before it is shown after it (its timestamps show it a B-frame: no frame references one); here it fails its GOP."""
    clean = _b_frame_clip(tmp_path / "m2.mp4", "mpeg2video")
    bad = _damaged(clean, 4, _p_as_b)
    good, broken = _decode(clean), _decode(bad)
    order = sorted(good)
    assert [order.index(p) for p, (_, flagged) in broken.items() if flagged] == [6]  # the premise: flagged, alone
    assert [i for i in range(12) if not np.array_equal(broken[order[i]][0], good[order[i]][0])] == [4, 5, 6, 7, 8, 9,
                                                                                                     10, 11]
    with VideoReader(bad) as reader:
        for wanted in ([7], [9], [11], [4, 8]):
            with pytest.raises(VideoDecodeError, match="could not be decoded: the decoder met corrupt data in frame"):
                reader.read(wanted)
        assert read_ids(reader.read([0, 1, 2, 12, 20])) == [0, 1, 2, 12, 20]


def test_a_raw_mpeg2_stream_s_p_frame_damaged_into_a_b_frame_still_fails_its_gop(tmp_path):
    """The same damage in a raw MPEG-2 stream (.m2v): its timestamps are the parser's, from the picture headers'
    types, the damaged one's too, so they follow the decoder's output order: P-frame 3, held back, came out after the
    flagged frame with a later timestamp, which passed it for a B-frame's forward reference: frame 3 failed alone and
    frames 4, 5 and 7, decoded after it against the wrong references, were handed out with no error. (P-frame 3
    itself, decoded before the damage, comes out under index 6, the parser's timestamp: no damage shows it.)"""
    clean = _b_frame_clip(tmp_path / "m2.m2v", "mpeg2video")
    with VideoReader(_damaged(clean, 4, _p_as_b)) as reader:
        assert reader._order[0].pts is not None  # the premise: the timestamps are read
        for wanted in ([4], [5], [7], [11]):
            with pytest.raises(VideoDecodeError, match="could not be decoded: the decoder met corrupt data in frame 3"):
                reader.read(wanted)
        assert read_ids(reader.read([0, 1, 2, 12, 20])) == [0, 1, 2, 12, 20]


def _vop_p_as_b(data: bytearray, start: int, size: int) -> None:
    """The MPEG-4 part 2 VOP header's vop_coding_type (its first 2 bits) turned from P (1) to B (2)."""
    at = start + bytes(data[start:start + size]).find(b"\x00\x00\x01\xb6") + 4
    assert data[at] >> 6 == 1  # (a P-VOP)
    data[at] = (data[at] & 0x3F) | (2 << 6)


@pytest.mark.parametrize(("file", "first"), [("m4.mp4", 4), ("m4.avi", 3)])
def test_an_mpeg4_p_frame_damaged_into_a_b_frame_fails_its_gop(tmp_path, file, first):
    """MPEG-4 part 2 (B-frames, GOP 12): packet 4 (decode order: the P-frame shown as frame 6) has its VOP's coding
    type broken into B. FFmpeg's decoder skips it, and the two B-frames after it, with no error and no flag, and
    decodes frames 7-11 against P-frame 3: wrong pictures. The reader took the gap for frames the decoder dropped,
    the timestamps labelling the rest: reads of frames 7-11 gave those pictures with no error; in AVI, whose
    timestamps are its parser's from the picture types (the damaged one's too), frame 6 gave P-frame 3's picture.
    Each frame now reads as it should or fails: those from the dropped ones to the next keyframe fail."""
    clean = _b_frame_clip(tmp_path / file, "mpeg4")
    bad = _damaged(clean, 4, _vop_p_as_b)
    broken = _decode(bad)
    assert len(broken) == N - 3 and not any(flagged for _, flagged in broken.values())  # the premise: dropped, silent
    with VideoReader(clean) as reader:
        want = reader.read(range(N))
    failed = []
    with VideoReader(bad) as reader:
        for i in range(N):
            try:
                got = reader.read([i])
            except VideoDecodeError as e:
                assert str(e).startswith(f"{bad}: frame {i} of {N} could not be decoded"), e
                failed.append(i)
                continue
            assert np.array_equal(got[0], want[i]), i
        assert failed == list(range(first, 12))
        with pytest.raises(VideoDecodeError, match=f"frame 7 of {N} could not be decoded: .*no frame and no error"):
            reader.read([7])
        assert np.array_equal(reader.read(range(12, N)), want[12:])
