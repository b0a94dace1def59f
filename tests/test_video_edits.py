"""MP4 / MOV edit lists that trim frames: complete files, not truncated ones (``tools.video_edits``)."""

from __future__ import annotations

import struct
from dataclasses import replace
from pathlib import Path

import av
import numpy as np
import pytest

from tests.test_video import id_frames, read_ids, write_raw
from tools.video import VideoDecodeError, VideoReader, probe, read_all_frames, read_frames
from tools.video_edits import kept_frames


def _end_trimmed(tmp_path: Path, keep: int, of: int = 40) -> Path:
    """A faststart MP4 of `of` frames (keyframe every 8) whose single edit shows only the first `keep` (its
    segment shortened)."""
    full = write_raw(tmp_path / "full.mp4", id_frames(of), gop=8, options={"movflags": "faststart"})
    data = bytearray(full.read_bytes())
    at = data.find(b"elst")
    assert data[at + 4] == 0 and struct.unpack_from(">I", data, at + 8)[0] == 1  # version 0, one edit
    duration = struct.unpack_from(">I", data, at + 12)[0]
    struct.pack_into(">I", data, at + 12, duration * keep // of)
    path = tmp_path / "trimmed.mp4"
    path.write_bytes(bytes(data))
    return path


def test_an_edit_list_that_ends_early_is_a_complete_clip(tmp_path):
    """FFmpeg shows the 16 frames the edit keeps (demuxing the next GOP as discard, dropping the rest); the
    scan compared the 40 the sample table declares with the packets and called the file truncated."""
    path = _end_trimmed(tmp_path, keep=16)
    with av.open(str(path)) as c:
        assert c.streams.video[0].frames == 40
    meta = probe(path)
    assert meta.frames == 16 and meta.duration == pytest.approx(16 / 16, abs=1e-3)
    assert read_ids(read_all_frames(path)) == list(range(16))
    assert read_ids(read_frames(path, [15, 0, 11])) == [15, 0, 11]
    assert kept_frames(path) == 16 and kept_frames(tmp_path / "full.mp4") == 40


def _late_start(tmp_path: Path, *, gop: int = 8, skip: int = 11, of: int = 30, frames: np.ndarray | None = None,
                ) -> Path:
    """Packets shifted `skip` frames before 0 (a stream copy cut after its first frames): the muxer writes an
    edit starting at frame `skip`, and FFmpeg demuxes the GOP before it marked discard (decoded, not shown). `frames`:
    the clip's (else `of` id frames)."""
    src = write_raw(tmp_path / "src.mp4", id_frames(of) if frames is None else frames, gop=gop)
    path = tmp_path / "late.mp4"
    with av.open(str(src)) as i, av.open(str(path), "w") as o:
        si = i.streams.video[0]
        so = o.add_stream_from_template(si)
        shift = int(skip / 16 / si.time_base)
        for p in i.demux(si):
            if p.size:
                p.stream, p.pts, p.dts = so, p.pts - shift, p.dts - shift
                o.mux(p)
    return path


def _counting(reader: VideoReader) -> None:
    """Make `reader` count the decoder's output, as `OutOfOrder` leaves it (timestamps found unusable)."""
    reader._order = (replace(reader._order[0], pts=None, keyframes=(), reorder=None), None)


def test_an_edit_list_that_starts_late_is_a_complete_clip(tmp_path):
    """Frame 11 on (keyframe 8 on: discard)."""
    path = _late_start(tmp_path)
    meta = probe(path)
    assert meta.frames == 19
    assert read_ids(read_all_frames(path)) == list(range(11, 30))
    assert read_ids(read_frames(path, [0, 18, 9])) == [11, 29, 20]


@pytest.mark.parametrize("gop", [8, 30])
def test_counting_the_output_of_a_late_edit_reads_its_first_partial_gop(tmp_path, gop):
    """The decoder decodes the keyframe the edit list discards (frame 8) and drops its frame, so frames 11-15 come
    out whole. Counting the output, the scan put the first keyframe at the first one kept (frame 16) and the reader
    waited for a keyframe to come out: frames 0-4 (11-15) were refused as a mid-GOP cut, and a clip whose only
    keyframe the edit drops (gop 30) gave no frame at all, where the timestamps read every one."""
    path = _late_start(tmp_path, gop=gop)
    with VideoReader(path) as reader:
        assert reader.meta.frames == 19 and reader._order[0].lead == 0
        _counting(reader)
        assert read_ids(reader.read(range(19))) == list(range(11, 30))
        assert read_ids(reader.read([2])) == [13]


@pytest.mark.parametrize("gop", [8, 30])
def test_a_late_edit_without_presentation_offsets_counts_from_its_first_frame(tmp_path, gop):
    """The same clips without their ``ctts`` (timestamps in decode order: the scan counts the decoder's output). The
    scan put the first keyframe at the first one kept (frame 16), three frames in: frames 0-2 were refused as a
    mid-GOP cut. FFmpeg decodes frames 13-29 (the discarded keyframe first)."""
    data = bytearray(_late_start(tmp_path, gop=gop).read_bytes())
    at = data.find(b"ctts")
    data[at : at + 4] = b"free"
    path = tmp_path / "no_ctts.mp4"
    path.write_bytes(bytes(data))
    with VideoReader(path) as reader:
        assert reader._order[0].pts is None and reader._order[0].lead == 0 and reader.meta.frames == 17
        assert read_ids(reader.read(range(17))) == list(range(13, 30))


def test_a_trimmed_clip_cut_short_is_still_truncated(tmp_path):
    data = _end_trimmed(tmp_path, keep=16).read_bytes()
    cut = tmp_path / "cut.mp4"
    mdat = data.find(b"mdat")
    cut.write_bytes(data[: mdat + (len(data) - mdat) // 3])  # the sample table whole, a third of the frames
    with pytest.raises(VideoDecodeError, match=r"cut.mp4: truncated file: its edit list keeps 16 of the 40"):
        probe(cut)


def test_a_corrupt_sample_run_count_is_cut_at_the_tracks_samples(tmp_path):
    """A corrupt ``stts`` run count (up to 2**32 - 1) was expanded whole: numpy asked for up to 32 GB, a bare
    MemoryError escaped the reader (the item an internal fault), and a count worth a few GB drove the machine into
    swap and the OOM killer. Runs are cut at the track's 40 samples (as FFmpeg reads them); the edit still keeps 16.
    (A million here: what the uncut expansion asks for stays small.)"""
    from tools.mp4_boxes import read_moov
    from tools.video_edits import _child, _presentation_times, _video_track

    path = _end_trimmed(tmp_path, keep=16)
    data = bytearray(path.read_bytes())
    at = data.find(b"stts") + 4  # version and flags, entry count, then (sample count, duration) runs
    runs = struct.unpack_from(">I", data, at + 4)[0]
    struct.pack_into(">I", data, at + 8 + 8 * (runs - 1), 10**6)  # the last run's count
    path.write_bytes(bytes(data))
    stbl = _child(_child(_child(_video_track(read_moov(path), None), b"mdia"), b"minf"), b"stbl")
    assert len(_presentation_times(stbl)) == 40
    assert kept_frames(path) == 16


def test_a_flagged_frame_the_edit_list_discards_fails_the_frames_that_reference_it(tmp_path):
    """The keyframe the late edit discards (frame 8: decoded for frames 11-15, not shown) has a fifth of its bytes
    zeroed: H.264 conceals and flags it, and FFmpeg dropped its frame with the flag (a discarded packet's), so frames
    11-15, damaged and not flagged, read as good ones. The reader now feeds such packets unmarked and drops their
    frames itself once its damage watch saw their flags: frames 0-4 (11-15) fail, the next GOP (16 on) reads."""
    from tests.test_video_concealed import _damaged, _decode, _gradient_ids, _zero_a_fifth
    clean = _late_start(tmp_path, frames=_gradient_ids(30))
    bad = _damaged(clean, 0, _zero_a_fifth)  # (decode order: the discarded keyframe first)
    good, broken = _decode(clean), _decode(bad)
    assert not any(flagged for _, flagged in broken.values())  # the premise: the flag dropped, no error
    differs = [p for p in sorted(good) if np.abs(broken[p][0].astype(int) - good[p][0]).mean() > 0.5]
    assert len(differs) == 5 and differs == sorted(good)[:5]  # ... and frames 11-15 damaged
    with VideoReader(bad) as reader, VideoReader(clean) as plain:
        assert reader.meta.frames == 19
        for i in range(5):
            with pytest.raises(VideoDecodeError, match=f"frame {i} of 19 .*corrupt data in a frame before the clip's "
                                                       "start"):
                reader.read([i])
        assert np.array_equal(reader.read(range(5, 19)), plain.read(range(5, 19)))
        _counting(reader)
        with pytest.raises(VideoDecodeError, match="frame 0 of 19 .*corrupt data"):
            reader.read([0])
