"""What a decoder's damage reaches: a packet it fails on leaves the reader seeking (a later read far from it seeks
again), and a concealed B-frame of MPEG-2 / MPEG-4 part 2 (no frame references one) fails that frame alone."""

from __future__ import annotations

import pytest

from tests.test_video import id_frames, read_ids, write_raw
from tests.test_video_concealed import _damaged, _flip_middle, _packets
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

