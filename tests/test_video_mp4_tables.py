"""MP4 sample tables and indexes that FFmpeg reads as the spec allows but our reader must not trust blindly:
no ``stss`` box, a fragment index (``sidx``) past the end of a cut file, and empty edits after the media."""

from __future__ import annotations

import struct
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


def _box(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I4s", 8 + len(payload), kind) + payload


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


def _with_mehd(data: bytes, ms: int) -> bytes:
    """A fragmented `data` whose ``mvex`` states the fragments' duration (`ms` in the movie's 1/1000 s), as GPAC,
    Bento4 and Shaka write it (FFmpeg does not)."""
    out = b""
    for kind, body in child_boxes(memoryview(data)):
        if kind == b"moov":
            body = b"".join(_box(k, (_box(b"mehd", struct.pack(">BxxxI", 0, ms)) if k == b"mvex" else b"") + bytes(v))
                            for k, v in child_boxes(body))
        out += _box(kind, bytes(body))
    return out


def test_a_fragmented_mp4_cut_between_fragments_that_its_mehd_times_is_truncated(tmp_path):
    """The ``mehd`` box says 3 s of fragments; cut after 3 of its 6, the clip probed as 24 frames, 1.5 s (FFmpeg
    ignores the box). The frames end at 1.62 s: the first is shown at 0.125 s (two B-frames' delay)."""
    # default_base_moof: fragment data offsets count from their moof, so the longer moov moves none of them
    frag = _write(tmp_path / "f.mp4", 48, options={"movflags": "frag_keyframe+empty_moov+default_base_moof"})
    data = _with_mehd(frag.read_bytes(), 3000)
    assert probe(data).frames == 48 and read_ids(read_all_frames(data)) == list(range(48))
    with pytest.raises(VideoDecodeError, match=r"<\d+ bytes>: truncated file: its 'mehd' box says the fragments last "
                       r"3\.00 s, but its frames end at 1\.\d+ s"):
        probe(_cut_after_fragments(data, 3))


def test_a_fragmented_mp4_without_an_index_cut_between_fragments_is_a_shorter_clip(tmp_path):
    """Without an index nothing in the file says more fragments were to come: the frames there, as a player."""
    full = _write(tmp_path / "frag.mp4", 48, options={"movflags": "frag_keyframe+empty_moov"})
    meta = probe(_cut_after_fragments(full.read_bytes(), 3))
    assert (meta.frames, meta.duration) == (24, 1.5)




def _with_edits(data: bytes, edits: list[tuple[int, int]]) -> bytes:
    """`data` (moov after mdat: no chunk offset moves) with its video track's edit list replaced by `edits`,
    (segment duration in the movie's ms, media time in the track's 1/16384 s or -1 for an empty edit)."""
    elst = _box(b"elst", struct.pack(">BxxxI", 0, len(edits))
                + b"".join(struct.pack(">IiHH", d, m, 1, 0) for d, m in edits))
    out = b""
    for kind, body in child_boxes(memoryview(data)):
        if kind == b"moov":
            traks = b""
            for child, payload in child_boxes(body):
                if child == b"trak":
                    kids = [(k, bytes(v)) for k, v in child_boxes(payload) if k != b"edts"]
                    kids.insert(1, (b"edts", elst))
                    payload = b"".join(_box(k, v) for k, v in kids)
                traks += _box(child, bytes(payload))
            body = traks
        out += _box(kind, bytes(body))
    return out


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> bytes:
    """40 id frames, 16 fps (1024 ticks of 1/16384 s each; B-frames: the first is shown at media time 2048)."""
    data = _write(tmp_path_factory.mktemp("elst") / "plain.mp4", 40).read_bytes()
    assert data.find(b"moov") > data.find(b"mdat")
    return data


FRAME, FIRST = 1024, 2048


def test_overlapping_edits_show_the_overlap_twice(tmp_path, plain):
    """Frames 0-23 then 16-39: the spec plays the overlap twice, FFmpeg too; 48 frames, one every 1/16 s."""
    path = tmp_path / "overlap.mp4"
    path.write_bytes(_with_edits(plain, [(1500, FIRST), (1500, FIRST + 16 * FRAME)]))
    meta = probe(path)
    assert meta.frames == 48 and meta.times == pytest.approx([i / 16 for i in range(48)])
    assert read_ids(read_all_frames(path)) == [*range(24), *range(16, 40)]
    assert read_ids(read_frames(path, [30, 20])) == [22, 20]


def test_a_leading_empty_edit_delays_the_clip_and_keeps_its_frames(tmp_path, plain):
    path = tmp_path / "delay.mp4"
    path.write_bytes(_with_edits(plain, [(500, -1), (2500, FIRST)]))
    meta = probe(path)
    assert meta.frames == 40 and meta.times == pytest.approx([i / 16 for i in range(40)])
    assert read_ids(read_frames(path, [39, 0, 20])) == [39, 0, 20]


@pytest.mark.parametrize("edits", [[(1000, FIRST), (500, -1), (1500, FIRST + 16 * FRAME)], [(2500, FIRST), (500, -1)]],
                         ids=["pause", "trailing"])
def test_an_empty_edit_after_media_is_refused_by_name(tmp_path, plain, edits):
    """A pause (or an empty tail) after media: FFmpeg shows the clip's first frames again in its place (frames
    0-5 between 15 and 16: 46 frames of a 40-frame clip), read as if they were the clip's."""
    path = tmp_path / "pause.mp4"
    path.write_bytes(_with_edits(plain, edits))
    where = 2  # 1-based, as people count entries
    for call in (lambda: probe(path), lambda: read_frames(path, [0]), lambda: probe(path.read_bytes())):
        with pytest.raises(VideoDecodeError, match=rf"unsupported edit list: its entry {where} of {len(edits)} is an "
                           r"empty edit \(a pause, media time -1\) after media: FFmpeg shows the clip's first frames "
                           r"again in its place \(46 frames where the edit list keeps 40\)"):
            call()
