"""MP4 sample tables and indexes that FFmpeg reads as the spec allows but our reader must not trust blindly:
no ``stss`` box, a fragment index (``sidx``) past the end of a cut file, and empty edits after the media."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from tests.test_video import id_frames, read_ids
from tools.mp4_boxes import child_boxes
from tools.video import VideoDecodeError, VideoReader, probe, read_all_frames, read_frames


def _write(path: Path, n: int, codec: str = "libx264", options: dict | None = None) -> Path:
    """`n` id frames at 16 fps, a keyframe every 8 (P-frames between), muxed by PyAV."""
    with av.open(str(path), "w", options=options or {}) as c:
        s = c.add_stream(codec, rate=16)
        s.width, s.height, s.pix_fmt = 64, 64, "yuv420p"
        s.codec_context.gop_size = 8
        for f in id_frames(n):
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
    return path


def _without_stss(path: Path) -> Path:
    """The file with its sync sample table renamed to a ``free`` box: every sample is then a sync sample."""
    data = bytearray(path.read_bytes())
    at = data.find(b"stss")
    assert at > 0
    data[at:at + 4] = b"free"
    out = path.with_name(f"nostss_{path.name}")
    out.write_bytes(bytes(data))
    return out


def test_an_mp4_without_stss_whose_samples_are_not_all_intra_reads_the_right_frames(tmp_path):
    """Without ``stss`` FFmpeg marks every MPEG-4 part 2 packet a keyframe (the spec's reading): the reader seeked
    straight to P-frames and returned frames decoded without their references (white, id 255) as frames
    37, 5 and 6. A seek whose frame comes out inter-coded now decodes from the start instead."""
    path = _without_stss(_write(tmp_path / "p.mp4", 40, codec="mpeg4", options={"movflags": "faststart"}))
    with av.open(str(path)) as c:
        assert all(p.is_keyframe for p in c.demux(video=0) if p.size)
    with VideoReader(path) as reader:
        assert reader.meta.frames == 40
        assert read_ids(reader.read([20, 37, 5, 6])) == [20, 37, 5, 6]
        assert read_ids(reader.read([33, 2])) == [33, 2]
    assert read_ids(read_all_frames(path)) == list(range(40))


def test_an_all_intra_mp4_without_stss_still_seeks(tmp_path):
    """Every frame intra-coded (MJPEG: no stss written, as the spec allows): each one is a real keyframe."""
    path = tmp_path / "mjpeg.mp4"
    with av.open(str(path), "w") as c:
        s = c.add_stream("mjpeg", rate=16)
        s.width, s.height, s.pix_fmt = 64, 64, "yuvj420p"
        for f in id_frames(24):
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
    assert b"stss" not in path.read_bytes()
    with VideoReader(path) as reader:
        assert reader._order[0].keyframes == tuple(range(24))
        assert read_ids(reader.read([17, 3, 23])) == [17, 3, 23]
        assert reader._seeks  # no seek missed: all-intra clips keep seeking
    assert np.all(np.diff(read_ids(read_all_frames(path))) == 1)


def _cut_after_fragments(data: bytes, fragments: int) -> bytes:
    """`data` cut where its `fragments`-th fragment (moof + mdat) ends: no box is cut short."""
    pos, seen = 0, 0
    for kind, body in child_boxes(memoryview(data)):
        pos += len(body) + 8
        seen += kind == b"mdat"
        if seen == fragments:
            return data[:pos]
    raise AssertionError(f"fewer than {fragments} fragments")


def test_a_fragmented_mp4_cut_between_fragments_that_its_sidx_indexes_is_truncated(tmp_path):
    """A fragment index (``sidx``, FFmpeg's global_sidx) gives the bytes of every fragment: cut after 3 of its 6
    fragments, the clip probed as 24 frames with the index's 3.125 s duration, no error."""
    full = _write(tmp_path / "sidx.mp4", 48, options={"movflags": "frag_keyframe+empty_moov+global_sidx"})
    assert probe(full).frames == 48
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(_cut_after_fragments(full.read_bytes(), 3))
    for call in (lambda: probe(cut), lambda: read_frames(cut, [0]), lambda: probe(cut.read_bytes())):
        with pytest.raises(VideoDecodeError, match=r"(cut.mp4|<\d+ bytes>): truncated file: its 'sidx' box \(at byte \d+\) "
                           r"indexes fragments up to byte \d+, but the file ends \d+ bytes short of them"
                           r" \(frames after the 24 read are missing\)"):
            call()


def test_a_fragmented_mp4_without_an_index_cut_between_fragments_is_a_shorter_clip(tmp_path):
    """Without an index nothing in the file says more fragments were to come: the frames there, as a player."""
    full = _write(tmp_path / "frag.mp4", 48, options={"movflags": "frag_keyframe+empty_moov"})
    meta = probe(_cut_after_fragments(full.read_bytes(), 3))
    assert (meta.frames, meta.duration) == (24, 1.5)
