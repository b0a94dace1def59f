"""Corrupt data the decoder conceals (it flags the one frame, ``frame.is_corrupt``) or fails on (H.264's
InvalidDataError for a packet): the frames decoded after it up to the next keyframe reference the damage."""

from __future__ import annotations

import io
from pathlib import Path

import av
import numpy as np
import pytest
from av.codec.context import ThreadType

from tests.test_video import id_frames, read_ids, write_elementary, write_raw
from tools import video_feed, video_reader, video_scan
from tools.video import VideoDecodeError, VideoReader

N = 40


def _gradient_ids(n: int = N, size: int = 96) -> np.ndarray:
    """Id stripes on top, a moving gradient below: P-frames carry enough residual that zeroed bytes break a slice."""
    frames = id_frames(n, size, size).copy()
    yy, xx = np.mgrid[0:size, 0:size]
    for t in range(n):
        g = np.stack([(xx * 3 + t * 5) % 256, (yy * 3 + t * 2) % 256, ((xx + yy) * 2 + t * 3) % 256], -1)
        frames[t, size // 3:] = g[size // 3:]
    return frames


def _packets(path: Path) -> list[av.Packet]:
    with av.open(str(path)) as c:
        return [p for p in c.demux(video=0) if p.size]


def _damaged(src: Path, packet: int, edit) -> Path:  # noqa: ANN001
    """`src` with bytes of its `packet`-th video packet (decode order) changed by `edit(bytearray, start, size)`."""
    data = bytearray(src.read_bytes())
    p = _packets(src)[packet]
    edit(data, p.pos, p.size)
    path = src.with_name(f"bad{packet}{src.suffix}")
    path.write_bytes(bytes(data))
    return path


def _zero_a_fifth(data: bytearray, start: int, size: int) -> None:
    at = start + size // 2
    data[at:at + size // 5] = bytes(size // 5)


def _decode(src: Path | bytes) -> dict[int, tuple[np.ndarray, bool]]:
    """Every frame FFmpeg gives (pts -> RGB, whether flagged corrupt), packets that fail skipped."""
    out = {}
    with av.open(io.BytesIO(src) if isinstance(src, bytes) else str(src)) as c:
        for packet in c.demux(video=0):
            try:
                for f in packet.decode():
                    out[f.pts] = (f.to_ndarray(format="rgb24"), f.is_corrupt)
            except av.error.InvalidDataError:
                continue
    return out


def gop12_clip(folder: Path) -> tuple[Path, np.ndarray]:
    """A 40-frame H.264 MP4 with B-frames (a pyramid), keyframes every 12 (0, 12, 24, 36), written in `folder`, and
    its frames as FFmpeg decodes them (the clean clip the damage tests compare with)."""
    path = write_raw(folder / "c.mp4", _gradient_ids(), gop=12)
    good = _decode(path)
    return path, np.stack([good[p][0] for p in sorted(good)])


@pytest.fixture(scope="module")
def concealed(tmp_path_factory) -> tuple[Path, Path, int]:
    """A 40-frame H.264 MP4 (keyframes every 12: 0, 12, 24, 36) and a copy whose third packet (decode order: the
    P-frame shown as frame 3, after B-frame 2) has a fifth of its bytes zeroed, and frame 3's pts."""
    clean = write_raw(tmp_path_factory.mktemp("c") / "c.mp4", _gradient_ids(), gop=12)
    return clean, _damaged(clean, 2, _zero_a_fifth), _packets(clean)[2].pts


def test_a_concealed_frame_and_those_that_reference_it_are_errors(concealed):
    """FFmpeg conceals the broken slice of frame 3 and flags that frame only; frame 2 (a B-frame decoded after it)
    and frames 4-11 reference it, are damaged too and not flagged. Each came back as the clip's frame, no error. A
    read of any of them now fails naming the frame and the damage; frames decoded before it, and those from the next
    keyframe on, still read, alone or together."""
    clean, bad, pts3 = concealed
    good, broken = _decode(clean), _decode(bad)
    assert [p for p, (_, flagged) in sorted(broken.items()) if flagged] == [pts3]  # the premise: one frame flagged
    ordered = sorted(broken)
    differs = [i for i, p in enumerate(ordered) if np.abs(broken[p][0].astype(int) - good[p][0]).mean() > 0.5]
    assert differs == list(range(2, 12))  # ... and ten damaged
    with VideoReader(bad) as reader:
        assert reader.meta.frames == N and reader._order[0].keyframes == (0, 12, 24, 36)
        for i in range(2, 12):
            with pytest.raises(VideoDecodeError, match=f"frame {i} of {N} could not be decoded: .*corrupt data in "
                                                       "frame 3"):
                reader.read([i])
        assert read_ids(reader.read([0, 1, 12, 20, 39])) == [0, 1, 12, 20, 39]
        assert read_ids(reader.read([1])) == [1]  # frame 2 came out before frame 3, its reference: not handed out
        with pytest.raises(VideoDecodeError, match="frame 5 of"):
            reader.read([1, 5, 30])


def test_a_concealed_keyframe_fails_its_gop(concealed, tmp_path):
    """The keyframe itself concealed (frame 12, flagged): frames 12-23 are errors, the GOPs around it read."""
    clean = concealed[0]
    bad = _damaged(clean, 12, _zero_a_fifth)
    flagged = [p for p, (_, f) in sorted(_decode(bad).items()) if f]
    assert flagged == [_packets(clean)[12].pts]
    with VideoReader(bad) as reader:
        assert read_ids(reader.read([0, 11, 24, 39])) == [0, 11, 24, 39]
        for i in (12, 13, 18, 23):
            with pytest.raises(VideoDecodeError, match=f"frame {i} of {N} .*corrupt data in frame 12"):
                reader.read([i])


def _flip_middle(data: bytearray, start: int, size: int) -> None:
    for j in range(start + size // 2, start + size // 2 + 8):
        data[j] ^= 0xFF


@pytest.fixture(scope="module")
def failing(tmp_path_factory) -> tuple[Path, int]:
    """A 40-frame H.264 MP4 of id frames (keyframes at 0, 8, 16, ...) whose 16th packet (decode order) fails to
    decode (InvalidDataError: FFmpeg gives no frame for it), and that frame's index."""
    clean = write_raw(tmp_path_factory.mktemp("f") / "f.mp4", id_frames(N), gop=8)
    bad = _damaged(clean, 15, _flip_middle)
    lost = sorted(p.pts for p in _packets(clean)).index(_packets(clean)[15].pts)
    return bad, lost


def test_a_packet_that_fails_to_decode_fails_only_its_frames(failing):
    """FFmpeg's H.264 decoder fails one packet with InvalidDataError and decodes on. That failed every read that
    decoded past it, the frames before it and those of the next GOPs included ("decoding failed ... InvalidDataError").
    A read now gives the frames decoded before it and from the next keyframe on, and a read of its frame (or of one
    decoded after it in its GOP) fails naming the frame."""
    bad, lost = failing
    with av.open(str(bad)) as c, pytest.raises(av.error.InvalidDataError):  # the premise
        for p in c.demux(video=0):
            p.decode()
    with VideoReader(bad) as reader:
        keys = reader._order[0].keyframes
        after = next(k for k in keys if k > lost)
        assert read_ids(reader.read([3, lost - 1, after, 39])) == [3, lost - 1, after, 39]
        with pytest.raises(VideoDecodeError, match=f"frame {lost} of {N} could not be decoded.*corrupt data"):
            reader.read([2, lost])
        readable = [i for i in range(lost + 1, after) if _reads(reader, i)]
        for i in readable:  # (a frame decoded before the failed packet, shown after it)
            assert read_ids(reader.read([i])) == [i]


def _reads(reader: VideoReader, i: int) -> bool:
    try:
        reader.read([i])
    except VideoDecodeError as e:
        assert f"frame {i} of {N} could not be decoded" in str(e), e
        return False
    return True


def _raw_h264(path: Path, n: int = N) -> Path:
    """A raw H.264 stream (no timestamps: the reader counts the decoder's output) of `n` id frames, B-frames."""
    return write_elementary(path, "libx264", "keyint=8:log-level=error", n)


def test_frames_counted_before_a_packet_the_decoder_fails_still_read(tmp_path):
    """A raw H.264 stream ending in a slice whose header is broken: FFmpeg fails that packet (InvalidDataError). The
    count check still held frames 35-37 (waiting on packets fed before they came out) and the error lost them: every
    read from frame 35 on failed ("decoding failed"). They read now; the frames that came out after the failed packet
    was fed cannot be counted past it (was it a frame shown before them?), and fail naming the decoder's error. (An
    access unit delimiter alone, which FFmpeg fails too, is no frame: tests/test_video_no_picture.py.)"""
    raw = _raw_h264(tmp_path / "r.h264")
    path = tmp_path / "broken.h264"
    path.write_bytes(raw.read_bytes() + b"\x00\x00\x00\x01\x41\xff\xff\xff")
    with VideoReader(path) as reader:
        assert reader._order[0].pts is None
        total = reader.meta.frames
        assert read_ids(reader.read(range(30, 38))) == list(range(30, 38))
        with pytest.raises(VideoDecodeError, match=f"frame 38 of {total} could not be decoded: the decoder failed on "
                                                   "packet 40 .*InvalidDataError"):
            reader.read([38])



def test_settling_a_read_decodes_no_packet_past_its_frames(concealed, monkeypatch):
    """A frame handed out waits for the frames decoded before it to come out (a reference shown after it may be the
    damaged one). The read fed the decoder more packets (up to 3 per read of these clips) until they did; it now
    flushes the decoder, which holds them decoded, and feeds what plain decoding to its last frame does."""
    clean = concealed[0]
    with av.open(str(clean)) as c:  # packets plain decoding feeds until frame 7 comes out
        needed = 0
        for packet in c.demux(video=0):
            needed += bool(packet.size)
            if any(read_ids(f.to_ndarray(format="rgb24")[None])[0] == 7 for f in packet.decode()):
                break
    fed = []
    real = video_feed.demux

    def counting(container, stream):  # noqa: ANN001, ANN202
        for packet in real(container, stream):
            fed.append(packet.size)
            yield packet

    monkeypatch.setattr(video_feed, "demux", counting)
    with VideoReader(clean) as reader:
        assert read_ids(reader.read(range(8))) == list(range(8))
    assert len([size for size in fed if size]) == needed


def frame_threaded_reads(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    """Every read's decoder runs ``count`` frame threads, the clip opened as a large one is ("AUTO")."""
    monkeypatch.setattr(video_scan, "frame_threads", lambda *_: True)
    opened = video_reader.video_stream

    def threaded(*args):  # noqa: ANN002, ANN202
        stream = opened(*args)
        stream.codec_context.thread_count = count
        return stream

    monkeypatch.setattr(video_reader, "video_stream", threaded)


def failed_reads(reader: VideoReader, want: np.ndarray) -> list[int]:
    """The frames whose single read (``reader.read([i])``) fails, each other read asserted to be ``want``'s frame."""
    failed = []
    for i in range(len(want)):
        try:
            assert np.array_equal(reader.read([i])[0], want[i]), i
        except VideoDecodeError:
            failed.append(i)
    return failed


def eight_frame_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decode with 8 frame threads (not the machine's count: 2 threads hold too few frames back; the small test clips
    decode without threads otherwise): an error comes back packets late."""
    frame_threaded_reads(monkeypatch, 8)


def test_a_settle_with_frame_threads_loses_no_flag_to_a_later_failed_packet(monkeypatch, tmp_path):
    """Frame threads: frame 4 (a B-frame) references frame 6, decoded before it and shown after it, which the decoder
    conceals and flags; packet 8 (decode order) fails. A read of frame 4 hands it out before frame 6 comes out and
    settles it. Flushing the decoder then gave the frames held before packet 8's slot, PyAV dropped the error that
    came after them (``CodecContext.decode`` keeps the frames it has and ends) and the flush reset lost frame 6's
    flag: frame 4 came back damaged, no error. With frame threads the settle decodes on instead (frame 6 comes out,
    or packet 8's error fails frame 4 within the threads' reach)."""
    eight_frame_threads(monkeypatch)
    clean = write_raw(tmp_path / "c.mp4", _gradient_ids(), gop=12)
    data, packets = bytearray(clean.read_bytes()), _packets(clean)
    p6, p8 = packets[4], packets[8]  # (decode order: 0 1 3 2 6 4 5 8 7 ...)
    at = p6.pos + p6.size // 2
    data[at:at + p6.size // 2] = bytes(p6.size // 2)  # frame 6 concealed, flagged
    data[p8.pos + 4] = 0x7F  # packet 8's NAL header broken: the decoder fails it
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(bytes(data))
    with av.open(str(bad)) as c:  # the premise
        flagged, failed = [], []
        for n, packet in enumerate(p for p in c.demux(video=0) if p.size):
            try:
                flagged += [f.pts for f in packet.decode() if f.is_corrupt]
            except av.error.InvalidDataError:
                failed.append(n)
    assert (flagged, failed) == ([p6.pts], [8])
    with VideoReader(bad) as reader:
        container, stream = reader._decoder(reader._order[0])
        with container:
            assert ThreadType.FRAME in stream.codec_context.thread_type
        assert read_ids(reader.read([0, 1, 2, 3])) == [0, 1, 2, 3]
        for wanted in ([4], [0, 1, 2, 3, 4]):
            with pytest.raises(VideoDecodeError, match=f"frame 4 of {N} could not be decoded: .*corrupt data"):
                reader.read(wanted)
