"""Damage in an HEVC clip's slice data: FFmpeg's HEVC decoder conceals nothing and flags nothing
(``frame.is_corrupt``), and by default it swallows its own errors, so a picture decoded from damaged data came out
as a good one, and so did every frame referencing it. Where the encoder wrote picture hashes (SEI decoded picture
hash, x265's ``hash``), the decoder checks each picture against its hash and, told to fail on what it finds, fails
the damaged picture's packet: ``tools.video_damage`` then fails it and the frames after it up to the next keyframe,
as for H.264. Without hashes nothing in the stream can show damage that still parses (``tools.video_damage``)."""

from __future__ import annotations

import faulthandler
import sys
from pathlib import Path

import av
import numpy as np
import pytest
from av.video.frame import PictureType

from tests.encoded_clips import write_rgb_clip
from tests.test_video_concealed import _damaged, _gradient_ids, _packets, eight_frame_threads
from tools.video import VideoDecodeError, VideoReader
from tools.video_damage import DamageWatch

N = 40


def _hevc(path: Path, params: str) -> Path:
    """A 40-frame HEVC MP4 (x265, keyframes at 0, 12, 24, 36, B-frames) of id stripes over a moving gradient."""
    return write_rgb_clip(path, _gradient_ids(N), "libx265", rate=16,
                          options={"x265-params": f"keyint=12:min-keyint=12:log-level=error{params}"})


def _zero_the_tail(data: bytearray, start: int, size: int) -> None:
    """Zero the second half of a packet's first NAL unit (its slice: its header intact; FFmpeg decodes it without an
    error), not the picture hash after it (a suffix SEI)."""
    nal = int.from_bytes(data[start:start + 4], "big")  # (MP4: each NAL unit after its 4-byte length)
    assert nal + 4 < size
    data[start + 4 + nal // 2:start + 4 + nal] = bytes(nal - nal // 2)


def _plain(src: Path) -> dict[int, np.ndarray]:
    """pts -> RGB of every frame FFmpeg gives (the premise: no frame flagged, no packet failed)."""
    out = {}
    with av.open(str(src)) as c:
        for packet in c.demux(video=0):
            for f in packet.decode():
                assert not f.is_corrupt
                out[f.pts] = f.to_ndarray(format="rgb24")
    return out


@pytest.mark.parametrize("threads", [False, True])
@pytest.mark.parametrize("packet, damaged", [(4, range(4, 12)), (12, range(12, 24))])
def test_damaged_hevc_slice_data_fails_the_frames_that_reference_it(tmp_path, monkeypatch, request, packet, damaged,
                                                                     threads):
    """Packet 4 (decode order: the P-frame shown as frame 4) or 12 (the keyframe, frame 12) with its second half
    zeroed: the decoder gave wrong pictures for it and the frames of its GOP after it, unflagged, and a read of each
    came back with no error. With the picture hashes checked they now fail, naming the corrupt data; the frames of the
    other GOPs, and those decoded before the packet, still read (not all with frame threads: the error comes back
    late). With frame threads the read hung: a frame thread freeing a packet's tag waited for the GIL the decoder's
    deallocation held (``tools.video_threads.release_decoder``)."""
    if threads:
        eight_frame_threads(monkeypatch)
        # a deadlock holds the GIL, which pytest-timeout needs: faulthandler's watchdog exits the run instead
        faulthandler.dump_traceback_later(300, exit=True, file=sys.__stderr__)
        request.addfinalizer(faulthandler.cancel_dump_traceback_later)
    clean = _hevc(tmp_path / "c.mp4", ":hash=1")
    bad = _damaged(clean, packet, _zero_the_tail)
    good, broken = _plain(clean), _plain(bad)
    order = sorted(good)
    differs = [i for i, p in enumerate(order) if np.abs(broken[p].astype(int) - good[p]).mean() > 0.5]
    assert differs == list(damaged)  # the premise: damaged pictures, no flag, no error
    # (frame threads: the failed packet gave no frame, its error late, so the frame read came out another's; one thread,
    # packet 12: frame 23, a leading picture of keyframe 24, which a fresh decoder there drops: tools.video_feed)
    late = r"( \(got pts \d+ instead\))?" if threads or packet == 12 else ""
    with VideoReader(bad) as reader:
        assert reader.meta.frames == N
        for i in damaged:
            with pytest.raises(VideoDecodeError, match=f"frame {i} of {N} could not be decoded{late}: .*corrupt data"):
                reader.read([i])
        if threads:  # (with frame threads an error names a packet up to the threads' count late: the watch fails
            return     # frames around it too, the next GOP's keyframe included; tools.video_damage.DamageWatch.of)
        with VideoReader(clean) as plain:
            fine = [i for i in range(N) if i < 2 or i >= damaged.stop]
            assert np.array_equal(reader.read(fine), plain.read(fine))


def test_a_clean_hevc_clip_with_picture_hashes_reads_every_frame(tmp_path):
    """Checking the hashes fails no frame of an undamaged clip (each picture matches its hash)."""
    clean = _hevc(tmp_path / "c.mp4", ":hash=1")
    assert len(_packets(clean)) == N
    with VideoReader(clean) as reader:
        assert np.array_equal(reader.read(range(N)), np.stack([f for _, f in sorted(_plain(clean).items())]))


def _pyramid_ts_cut(tmp_path: Path) -> Path:
    """An MPEG-TS x265 clip (picture hashes, B-pyramid, open GOPs: a keyframe every 8 frames) without its first 3
    packets: decode order 4 packets (their parameter sets lost), the keyframe (frame 5), then its leading picture
    (frame 4, references lost with the cut), which the decoder, told to fail on what it finds, fails."""
    from tests.test_video_open_gop import _drop
    frames = _gradient_ids(N)
    path = tmp_path / "pyr.ts"
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx265", rate=16)
        s.width, s.height, s.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
        s.options = {"x265-params": "hash=1:keyint=8:min-keyint=8:bframes=8:b-pyramid=1:b-adapt=2:open-gop=1:"
                                    "log-level=error"}
        for f in frames:
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
    return _drop(path, 3)


@pytest.mark.parametrize("seeks", [True, False])
def test_a_clean_clip_cut_mid_gop_reads_its_first_gop_by_timestamps(tmp_path, seeks):
    """The cut clip's leading picture of its first keyframe fails its packet (its references lost with the cut), as
    FrameIndex.lead counts it: forgiven in a decode from the start only where the read's first keyframe was frame 0
    (no keyframe at or before it): a read of a frame of the first GOP (keyframe 5), by a seek that lands at the
    clip's start or decoding from it (``seeks`` off: the reader's fallback), failed frames 6-12 of a clean clip
    ("corrupt data in packet 5"). They read, as they did before the decoder failed on what it finds."""
    path = _pyramid_ts_cut(tmp_path)
    with VideoReader(path) as reader:
        index = reader._order[0]
        assert index.pts is not None and index.lead == 5 and index.keyframes[0] == 5
        total = reader.meta.frames
        every = np.stack([f.to_ndarray(format="rgb24") for _, f in reader.iter_frames()])  # (counted: from the lead)
        reader._seeks = seeks
        for i in range(index.lead, total):
            assert np.array_equal(reader.read([i])[0], every[i - index.lead]), i


def _bad_keyframe_header(data: bytearray, start: int, size: int) -> None:
    """The packet's first slice (an MP4 sample's first NAL unit: a keyframe's, no SEI before it) naming a picture
    parameter set that does not exist: the decoder, told to fail on what it finds, fails the packet; the frames after
    it decode with no error on a reference it makes up."""
    data[start + 6:start + 9] = b"\x80\xff\xff"  # (past its length and NAL unit header) first slice, PPS id 126


@pytest.mark.parametrize("seeks", [True, False])
def test_a_failed_first_keyframe_of_a_clip_cut_mid_gop_is_not_forgiven(tmp_path, seeks):
    """The lead's failures are forgiven in a decode from the start (its first GOP's reads) but the keyframe's own:
    where it failed no frame of its GOP reads (they reference a picture the decoder made up), which a read reaching
    them by the timestamps would hand out with no error had the keyframe's failure been forgiven as the lead's."""
    from tests.test_video_open_gop import _drop
    cut = _drop(_hevc(tmp_path / "c.mp4", ""), 3)  # (no picture hashes: nothing else shows the damage)
    bad = _damaged(cut, 9, _bad_keyframe_header)  # the first keyframe (frame 9)
    with VideoReader(bad) as reader:
        assert reader._order[0].lead == 9 and reader._order[0].keyframes[:2] == (9, 21)
        reader._seeks = seeks
        for i in range(9, 21):
            with pytest.raises(VideoDecodeError, match=f"frame {i} of 37 .*packet"):
                reader.read([i])
        if seeks:  # (decoded on from the damaged GOP, the next keyframe's leading pictures fail too)
            with VideoReader(cut) as plain:
                assert np.array_equal(reader.read([21, 30]), plain.read([21, 30]))


def _frame(tag: int, *, key: bool = False) -> av.VideoFrame:
    """A frame out of the decoder, of the packet tagged `tag` (decode order)."""
    frame = av.VideoFrame(16, 16, "yuv420p")
    frame.opaque, frame.pts, frame.key_frame = (tag, 0), tag, key
    frame.pict_type = PictureType.I if key else PictureType.P
    return frame


def test_the_lead_forgives_no_failure_of_the_keyframe_s_own_packet():
    """A decode from the start of a clip cut mid-GOP (lead 9: packets 0-8 before the keyframe, the keyframe's 9):
    the lead's failures are forgiven, but the keyframe's own was forgiven too (tag <= lead): a decoder that decodes
    on past it (its frames on a reference it makes up, no error, no flag) handed out the frames after it as good
    data. The failure of a lead packet now waits until the first frame of the count comes out: a keyframe (or intra
    frame) forgives it; another frame (the keyframe failed: none came out) is damaged by it."""
    watch = DamageWatch("c.hevc", 37, lead=9)
    watch.failed(4, "InvalidDataError")  # (a packet before the keyframe: its parameter set lost with the cut)
    watch.failed(9, "InvalidDataError")  # the keyframe's
    watch.came_out(_frame(5), lost=True)
    place = watch.came_out(_frame(10), 10)
    assert watch.damage(place) is not None  # (no keyframe out: the failures before it count too)
    fine = DamageWatch("c.hevc", 37, lead=10)  # (the keyframe's 9, then its leading picture's: shown before it)
    fine.failed(4, "InvalidDataError")
    fine.failed(10, "InvalidDataError")  # (the leading picture: its references lost with the cut)
    assert fine.damage(fine.came_out(_frame(9, key=True), 9)) is None
    assert fine.damage(fine.came_out(_frame(11), 11)) is None


def test_a_raw_hevc_clip_whose_only_keyframe_failed_names_the_damage(tmp_path):
    """A raw HEVC stream (no timestamps: the reader counts the decoder's output) of one GOP whose keyframe's slice
    header names a picture parameter set that does not exist: the decoder, told to fail on what it finds, fails it
    and every picture after it (no reference), and gives no frame. A read said "stream ended early", naming no damage,
    and ``iter_frames`` ended with no frame and no error; each now fails naming the failed packet."""
    from tests.test_video import write_elementary
    from tests.test_video_dropped_frames import _bad_slice_header
    src = write_elementary(tmp_path / "c.hevc", "libx265", "log-level=error:keyint=60:bframes=2", N)
    with av.open(str(src)) as c:
        packets = [bytes(p) for p in c.demux(video=0) if p.size]
    packets[0] = _bad_slice_header(packets[0])
    bad = tmp_path / "bad.hevc"
    bad.write_bytes(b"".join(packets))
    with VideoReader(bad) as reader:
        assert reader._order[0].pts is None and reader.meta.frames == N
        for i in (0, 5, N - 1):
            with pytest.raises(VideoDecodeError, match=f"frame {i} of {N} could not be decoded: the decoder met corrupt "
                                                       "data in packet 0 .*InvalidDataError"):
                reader.read([i])
        with pytest.raises(VideoDecodeError, match=f"frame 0 of {N} could not be decoded: .*corrupt data in packet 0"):
            list(reader.iter_frames())
