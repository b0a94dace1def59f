"""Which frames a failed HEVC packet blames with frame threads: the decoder tells a packet's error as the packet fed
``thread_count - 1`` decoder packets after it goes in (FFmpeg's frame threads hand back a packet's result once every
thread holds one), so the frames decoded before the failed packet are intact and read; those decoded from it up to the
next keyframe fail."""

from __future__ import annotations

import faulthandler
import sys

import numpy as np
import pytest

from tests.test_video_concealed import _damaged, eight_frame_threads, failed_reads, frame_threaded_reads
from tests.test_video_hevc_damage import N, _hevc, _plain, _zero_the_tail
from tools.video import VideoDecodeError, VideoReader


def _hashed_clip(tmp_path, packets: list[int], params: str = "") -> tuple:  # noqa: ANN001
    """(damaged clip, the clean clip's frames): the x265 test clip with picture hashes (``params`` added to its x265
    parameters), the slices of its ``packets`` (decode order) zeroed one after another."""
    clean = _hevc(tmp_path / "c.mp4", ":hash=1" + params)
    bad = clean
    for packet in packets:
        bad = _damaged(bad, packet, _zero_the_tail)
    return bad, np.stack([f for _, f in sorted(_plain(clean).items())])


@pytest.fixture
def watchdog(request):  # noqa: ANN001, ANN201
    """A GIL deadlock (a decoder freed while a frame thread holds a packet) ends the run instead of hanging it."""
    faulthandler.dump_traceback_later(300, exit=True, file=sys.__stderr__)
    request.addfinalizer(faulthandler.cancel_dump_traceback_later)


@pytest.mark.parametrize("seeks", [True, False])
def test_frames_decoded_before_a_failed_packet_read_with_frame_threads(tmp_path, monkeypatch, watchdog, seeks):
    """Packet 4 (decode order; frames 0-3 decoded before it, intact) has its slice zeroed: its picture fails its hash,
    the error 7 packets late (8 frame threads), and with it the next 7 packets fail (each thread that waited on it).
    The blame ran 15 tags back from each error (the most frame threads FFmpeg picks): a read of frame 1 failed.
    Now frames 0-3 read as in the clean clip; 4-11 fail (the decoder puts frame 10, damaged, out before frame 3: such a
    damaged frame out of its place is passed over, no place passed, and frame 3 reads; frames out of order after a
    failed packet fail the read, where they made the reader count the decoder's output, handing out a frame of the next
    GOP as frame 11); by a seek the next GOP (keyframe 12) reads, and no read gives a frame unlike the clean clip's."""
    eight_frame_threads(monkeypatch)
    bad, plain = _hashed_clip(tmp_path, [4])
    with VideoReader(bad) as reader:
        reader._seeks = seeks
        for i in range(4):
            assert np.array_equal(reader.read([i])[0], plain[i]), i
        assert np.array_equal(reader.read(range(4)), plain[:4])
        for i in range(4, 12):
            with pytest.raises(VideoDecodeError, match=f"frame {i} of {N} could not be decoded.*corrupt data"):
                reader.read([i])
        for i in range(12, N):
            try:
                assert np.array_equal(reader.read([i])[0], plain[i]), i
            except VideoDecodeError:
                assert not seeks, i  # (decoded from the start, the frames out of order fail it)
        out = []
        with pytest.raises(VideoDecodeError, match=f"frame 3 of {N} could not be decoded.*corrupt data"):
            for _, frame in reader.iter_frames():
                out.append(reader.to_rgb(frame))
        assert np.array_equal(np.stack(out), plain[:3])


def test_the_blame_counts_packets_fed_not_tags():
    """With 4 frame threads an error comes back as the packet 3 after the failed one goes in: counted in packets fed
    to the decoder. Tag 2 is a packet of no picture carried at the head of tag 3's (one packet), so the error given on
    tag 5's packet is tag 1's, not tag 2's (5 - 3); at the flush it may be any packet still held; a discarded packet
    stands between the tags around it."""
    from av.codec.context import CodecContext, ThreadType

    from tools.video_threads import ErrorLag
    ctx = CodecContext.create("hevc", "r")
    ctx.thread_type, ctx.thread_count = ThreadType.FRAME, 4
    lag = ErrorLag(ctx)
    for tag in (0, 1, 3, 4, 5):
        lag.fed(tag)
    assert lag.blame() == (1, 1)
    assert lag.blame(end=True) == (1, 5)
    lag.fed(6, discarded=True)  # (after tag 5, before tag 6)
    for tag in (6, 7, 8):
        lag.fed(tag)
    assert lag.blame() == (6, 5)
    ctx.thread_type = ThreadType.SLICE  # (no frame threads: the packet just fed)
    assert lag.blame() == (8, 8)


@pytest.mark.parametrize("threads", [2, 3, 8])
@pytest.mark.parametrize("packet", [3, 22])
def test_iter_frames_fails_frames_put_out_of_order_by_a_failed_packet(tmp_path, monkeypatch, watchdog, threads,
                                                                       packet):
    """Packet 3 (frame 1, a B-frame decoded after frames 0, 3 and 2) has its slice zeroed: it fails its hash, and the
    decoder puts frame 2 out before frame 1. The blame falls on packet 3 alone, so frame 2 (packet 2, decoded before
    it) counted no damage, and iter_frames, which counts the decoder's output, handed it out as frame 1, no error (the
    old 15-tag window failed it by chance). A frame whose timestamp names another frame than its count, once the
    decoder failed a packet, now fails: every frame yielded is the clean clip's."""
    frame_threaded_reads(monkeypatch, threads)
    bad, plain = _hashed_clip(tmp_path, [packet])
    with VideoReader(bad) as reader:
        with pytest.raises(VideoDecodeError, match="corrupt data"):
            for i, frame in reader.iter_frames():
                assert np.array_equal(reader.to_rgb(frame), plain[i]), i


@pytest.mark.parametrize("codec, lag", [("mpeg2video", 0), ("mpeg1video", 0), ("hevc", 2), ("mpeg4", 2)])
def test_the_blame_lags_only_where_the_decoder_has_frame_threads(codec, lag):
    """The reader asks every codec for frame threads ("AUTO") from 640x360 up; MPEG-1 / MPEG-2 video have none (FFmpeg
    runs their slice threads), yet the context still reports FRAME in its thread type and 3 threads once open (on 2
    cores). The blame then fell 2 packets before the packet just fed, whose own error it was: a failure in the packet
    after a keyframe blamed the one before the keyframe, and no frame of the new GOP counted it."""
    from av.codec.context import CodecContext

    from tools.video_threads import ErrorLag
    ctx = CodecContext.create(codec, "r")
    ctx.thread_type, ctx.thread_count, ctx.width, ctx.height = "AUTO", 3, 720, 576
    ctx.open(strict=False)
    assert ctx.thread_count == 3
    blame = ErrorLag(ctx)
    for tag in range(6):
        blame.fed(tag)
    assert blame.blame() == (5 - lag, 5 - lag)


@pytest.mark.parametrize("threads", [2, 8])
def test_a_read_from_the_start_skips_the_damaged_frames_put_out_late_after_a_failed_packet(tmp_path, monkeypatch,
                                                                                            watchdog, threads):
    """A P-only x265 clip (keyframes 0, 12, 24, 36) whose packet 3 fails its hash, read from the start (no seeks) with
    frame threads: the decoder put the damaged GOP's frames out among the next GOP's (3, 4, 12, 5, 13, ...), and
    the reads of frames 13-39 failed as out of order after a failed packet (4 of 40 frames read; by seeks 31). A
    frame out late that the watch calls damaged is now passed over, never handed out: frames 12-39 read as in the
    clean clip, frames 3-11 still fail, and no read gives a frame unlike the clean clip's."""
    frame_threaded_reads(monkeypatch, threads)
    bad, plain = _hashed_clip(tmp_path, [3], ":bframes=0")
    with VideoReader(bad) as reader:
        reader._seeks = False
        failed = failed_reads(reader, plain)
        assert failed == list(range(3, 12))
        assert np.array_equal(reader.read(range(12, N)), plain[12:])


@pytest.mark.parametrize("threads", [2, 4, 8])
def test_a_second_failed_packet_read_from_the_start_fails_its_frame(tmp_path, monkeypatch, watchdog, threads):
    """The P-only x265 clip with packets 3 and 13 failing their hashes, read from the start (no seeks): after the
    first failure the decoder put frames 9-11 out after frame 12, and gave packet 13's error as packet 16's, 6 packets
    late, not 3 (its output, held back, brings the errors with it). Frames 9-11, damaged, were passed over, and the
    read handed out frame 13 (and 14-16 with 8 threads) unlike the clean clip's, no error. A failure told after another
    now reaches back to the first packet since the last keyframe out whose frame has not come out: those fail."""
    frame_threaded_reads(monkeypatch, threads)
    bad, plain = _hashed_clip(tmp_path, [3, 13], ":bframes=0")
    with VideoReader(bad) as reader:
        reader._seeks = False
        failed = failed_reads(reader, plain)
        assert {3, 13} <= set(failed), failed


@pytest.mark.parametrize("threads", [1, 2, 4, 8])
def test_a_damaged_keyframe_after_a_failed_gop_read_from_the_start_fails(tmp_path, monkeypatch, watchdog, threads):
    """The P-only x265 clip with packets 1 and 12 (the second keyframe) failing their hashes, read from the start (no
    seeks): FFmpeg gives packet 1's error, but none for keyframe 12, whose frame and those after it up to frame 23 are
    unlike the clean clip's (read fresh from keyframe 12, by a seek or with packet 12 alone damaged, packet 12 fails).
    No read may hand out a frame unlike the clean clip's."""
    frame_threaded_reads(monkeypatch, threads)
    bad, plain = _hashed_clip(tmp_path, [1, 12], ":bframes=0")
    with VideoReader(bad) as reader:
        reader._seeks = False
        failed = failed_reads(reader, plain)
        assert failed == list(range(1, 24)), failed


@pytest.mark.parametrize("threads", [2, 4, 8])
def test_a_damaged_keyframe_fed_before_a_late_error_fails(tmp_path, monkeypatch, watchdog, threads):
    """The P-only x265 clip with packets 1, 12 and 24 (keyframes 12 and 24) failing their hashes, read from the start
    (no seeks) with frame threads: the fresh decoder from keyframe 12 tells packet 12's error packets late (8 threads:
    as packet 19's; the errors of the threads that waited on it up to packet 26's), after keyframe 24 went in: its
    checks lapsed, keyframe 24 decoded with no error, and frames 24-25 were handed out unlike the clean clip's. A
    keyframe fed after the packet an error blames now starts a fresh decoder too: no read gives a frame unlike the clean
    clip's, and the last GOP (36 on) reads."""
    frame_threaded_reads(monkeypatch, threads)
    bad, plain = _hashed_clip(tmp_path, [1, 12, 24], ":bframes=0")
    with VideoReader(bad) as reader:
        reader._seeks = False
        failed = failed_reads(reader, plain)
        assert failed == list(range(1, 36)), failed


def test_a_failure_told_at_once_blames_no_keyframe_decoded_before_it(tmp_path, watchdog):
    """The x265 clip with B-frames (open GOPs) and packets 12 (keyframe 12) and 26 (frame 25) failing their hashes,
    read from the start on one thread (no seeks): packet 24 (frame 23, a leading picture of keyframe 24, decoded after
    it) fails too, and its error came out before keyframe 24's frame (held back to be shown after 23). The blame
    reached back over keyframe 24's packet, whose frame is intact, and its read failed. One thread tells a packet's
    error as it goes in: the failure is that packet's, and keyframe 24 reads as in the clean clip."""
    bad, plain = _hashed_clip(tmp_path, [12, 26])
    with VideoReader(bad) as reader:
        reader._seeks = False
        assert np.array_equal(reader.read([24])[0], plain[24])
        for i in (12, 23, 25):
            with pytest.raises(VideoDecodeError):
                reader.read([i])


def test_a_damaged_keyframe_right_after_a_failed_packet_read_from_the_start_fails(tmp_path, watchdog):
    """The P-only x265 clip with packets 11 and 12 (the second keyframe) failing their hashes, read from the start on
    one thread (no seeks): the decoder gave packet 11's error and none for keyframe 12 (its checks lapse after a
    failed packet), and reads of frames 12-23 handed them out unlike the clean clip's. The decoder is now a fresh one
    from keyframe 12 on, which fails its packet: no read gives a frame unlike the clean clip's."""
    bad, plain = _hashed_clip(tmp_path, [11, 12], ":bframes=0")
    with VideoReader(bad) as reader:
        reader._seeks = False
        failed = failed_reads(reader, plain)
        assert failed == list(range(11, 24)), failed


def test_a_damaged_keyframe_sought_after_a_failed_packet_in_the_same_read_fails(tmp_path, watchdog):
    """The x265 clip with B-frames (open GOPs) and packet 23 (keyframe 24) failing its hash, frames 22 and 24 read at
    once with seeks on one thread: decoding to frame 22 (from keyframe 12) fed packet 23, which failed, then a seek to
    keyframe 24 decoded it again on the same decoder, whose checks had lapsed: no error, and frame 24, unlike the clean
    clip's, was handed out. A decoder that failed a packet is replaced for the rest of the read, past a seek too."""
    bad, plain = _hashed_clip(tmp_path, [23])
    with VideoReader(bad) as reader:
        with pytest.raises(VideoDecodeError, match=f"frame 24 of {N} could not be decoded.*corrupt data"):
            reader.read([24])
        for i in range(12, 23):
            try:
                got = reader.read([i, 24])
            except VideoDecodeError:
                continue
            assert np.array_equal(got, plain[[i, 24]]), i


@pytest.mark.parametrize("threads", [2, 4])
def test_a_handover_at_an_open_gop_keyframe_fails_no_frame_before_the_damage(tmp_path, monkeypatch, watchdog, threads):
    """The x265 clip with B-frames (open GOPs) and packet 29 failing its hash, read by seeks with frame threads: a read
    of frame 25 decodes to the end (frame 23, a leading picture of keyframe 24, gives no frame after the seek, and
    the frame-threaded settle waits on it). The old decoder handed over to a fresh one at keyframe 36, dropping its
    frames from there on, leading pictures 34-35 among them, which a fresh decoder from keyframe 36 skips (they
    reference the GOP before): the end of the stream came with no frame 34, and the reads of frames 25-28, intact,
    failed (ba1ffb64 read them). The old decoder's leading pictures that the fresh one gives not now come out (the
    failed packet damages them): frames 29-35 fail, the others read as in the clean clip."""
    frame_threaded_reads(monkeypatch, threads)
    bad, plain = _hashed_clip(tmp_path, [29])
    with VideoReader(bad) as reader:
        assert failed_reads(reader, plain) == list(range(29, 36))



def test_a_handover_at_a_keyframe_fails_no_frame_of_its_gop(tmp_path, monkeypatch, watchdog):
    """The x265 clip with B-frames (open GOPs) and packet 9 (frame 8) failing its hash, read from the start (no seeks)
    with 8 frame threads: FFmpeg hands packet 9's error back in the slot of the frame its thread put out (frame 7,
    decoded before packet 9) and frame 7 a round of the threads later, after frames 8-11 (fed 25 packets). Undamaged
    and out of order, it failed the read ("got pts 7168 instead") of every frame after it: frames 12-39, which the
    fresh decoder from keyframe 12 gives as in the clean clip (ba1ffb64 read frames 12-14, which the old decoder gave
    before frame 7). A frame decoded before the failed packet and put out late is now passed over (its place passed):
    only frame 7 (frame 8 came out first) and the damaged frames 8, 10 and 11 fail."""
    eight_frame_threads(monkeypatch)
    bad, plain = _hashed_clip(tmp_path, [9])
    with VideoReader(bad) as reader:
        reader._seeks = False
        failed = failed_reads(reader, plain)
        assert failed == [7, 8, 10, 11]


def test_a_seek_to_an_open_gops_keyframe_waits_on_no_leading_picture_it_skips(tmp_path, monkeypatch, watchdog):
    """The x265 clip with B-frames (open GOPs: CRA keyframes 12, 24) and packet 37 (the last GOP's) failing its hash,
    read by seeks with 4 frame threads. The decoder, started at keyframe 24, skips its leading picture (RASL: packet
    25, frame 23, referencing the GOP before) and gives no frame for it; frame 25 (and each read frame after 24) waited
    on that packet to the end of the stream, where PyAV lost the frames after packet 37's error in the flush, and the
    read failed "gave no frame 35 and no error". HEVC's frames after a keyframe reference none of its leading ones."""
    frame_threaded_reads(monkeypatch, 4)
    bad, plain = _hashed_clip(tmp_path, [37])
    with VideoReader(bad) as reader:
        assert np.array_equal(reader.read([25, 27]), plain[[25, 27]])


@pytest.mark.parametrize(("packet", "wanted"), [(24, [15, 27]), (36, [27, 38])])
def test_a_frame_fed_before_a_seek_is_no_frame_of_the_decode_after_it(tmp_path, monkeypatch, watchdog, packet,
                                                                       wanted):
    """The x265 clip with B-frames (open GOPs) and packet 36 (a leading picture of keyframe 36) failing its hash,
    read [27, 38] by seeks with 8 frame threads: the decode from keyframe 24 fed packets past keyframe 36 to settle
    frame 27; after the seek to keyframe 36 (its flush), the decoder put frame 34 out, fed before the seek, under
    that decode's tag 10 (a packet not fed yet in the new one). Out of order, it sent the read back to the start,
    where the decoder gave no frame 34 and PyAV lost the frames after the error at the end: "frame 38 of 40 could not
    be decoded". A frame tagged in an earlier decode is now dropped: the seek's decode (packet 36, a leading picture
    of the keyframe it starts at, skipped) reads both frames as in the clean clip. The same for packet 24 and
    [15, 27]."""
    eight_frame_threads(monkeypatch)
    bad, plain = _hashed_clip(tmp_path, [packet])
    with VideoReader(bad) as reader:
        assert np.array_equal(reader.read(wanted), plain[wanted])


@pytest.mark.parametrize("threads", [4, 6, 8])
def test_a_packet_failed_unseen_before_a_seek_leaves_no_damaged_frame_after_it(tmp_path, monkeypatch, watchdog,
                                                                                threads):
    """The x265 clip without B-frames, packet 13 (frame 13, the P-frame after keyframe 12) failing its hash, read
    [10, 13] by seeks with 4-8 frame threads: the decode from keyframe 0 fed packets past 12 and 13 to settle frame 10;
    packet 13's failure, in flight, was never told (the seek's flush dropped it), but the decoder's checks lapsed with
    it, and after the seek to keyframe 12 the same decoder gave the damaged frame 13 with no error: handed out as
    good. (Before frames of earlier decodes were dropped, one of them, misread as this decode's, failed the read by
    chance.) Frame 13 must fail; frame 10 alone reads as in the clean clip."""
    frame_threaded_reads(monkeypatch, threads)
    bad, plain = _hashed_clip(tmp_path, [13], ":bframes=0")
    with VideoReader(bad) as reader:
        with pytest.raises(VideoDecodeError, match="frame 13 of 40"):
            reader.read([10, 13])
        assert np.array_equal(reader.read([10]), plain[[10]])
