"""Damage in an HEVC clip's slice data: FFmpeg's HEVC decoder conceals nothing and flags nothing
(``frame.is_corrupt``), and by default it swallows its own errors, so a picture decoded from damaged data came out
as a good one, and so did every frame referencing it. Where the encoder wrote picture hashes (SEI decoded picture
hash, x265's ``hash``), the decoder checks each picture against its hash and, told to fail on what it finds, fails
the damaged picture's packet: ``tools.video_damage`` then fails it and the frames after it up to the next keyframe,
as for H.264. Without hashes nothing in the stream can show damage that still parses (``tools.video_damage``)."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from tests.test_video_concealed import _damaged, _gradient_ids, _packets
from tools import video_reader, video_scan
from tools.video import VideoDecodeError, VideoReader

N = 40


def _hevc(path: Path, params: str) -> Path:
    """A 40-frame HEVC MP4 (x265, keyframes at 0, 12, 24, 36, B-frames) of id stripes over a moving gradient."""
    frames = _gradient_ids(N)
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx265", rate=16)
        s.width, s.height, s.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
        s.options = {"x265-params": f"keyint=12:min-keyint=12:log-level=error{params}"}
        for f in frames:
            for p in s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


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


def _frame_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decode with 8 frame threads (these small clips decode without threads): an error comes back packets late."""
    monkeypatch.setattr(video_scan, "frame_threads", lambda *_: True)
    opened = video_reader.video_stream

    def eight_threads(*args):  # noqa: ANN002, ANN202
        stream = opened(*args)
        stream.codec_context.thread_count = 8
        return stream

    monkeypatch.setattr(video_reader, "video_stream", eight_threads)


@pytest.mark.parametrize("threads", [False])  # (True hangs: tools.video_damage.watched_decoder)
@pytest.mark.parametrize("packet, damaged", [(4, range(4, 12)), (12, range(12, 24))])
def test_damaged_hevc_slice_data_fails_the_frames_that_reference_it(tmp_path, monkeypatch, packet, damaged, threads):
    """Packet 4 (decode order: the P-frame shown as frame 4) or 12 (the keyframe, frame 12) with its second half
    zeroed: the decoder gave wrong pictures for it and the frames of its GOP after it, unflagged, and a read of each
    came back with no error. With the picture hashes checked they now fail, naming the corrupt data; the frames of the
    other GOPs, and those decoded before the packet, still read. So with frame threads."""
    if threads:
        _frame_threads(monkeypatch)
    clean = _hevc(tmp_path / "c.mp4", ":hash=1")
    bad = _damaged(clean, packet, _zero_the_tail)
    good, broken = _plain(clean), _plain(bad)
    order = sorted(good)
    differs = [i for i, p in enumerate(order) if np.abs(broken[p].astype(int) - good[p]).mean() > 0.5]
    assert differs == list(damaged)  # the premise: damaged pictures, no flag, no error
    with VideoReader(bad) as reader:
        assert reader.meta.frames == N
        for i in damaged:
            with pytest.raises(VideoDecodeError, match=f"frame {i} of {N} could not be decoded: .*corrupt data"):
                reader.read([i])
        with VideoReader(clean) as plain:
            fine = [i for i in range(N) if i < 2 or i >= damaged.stop]
            assert np.array_equal(reader.read(fine), plain.read(fine))


def test_a_clean_hevc_clip_with_picture_hashes_reads_every_frame(tmp_path):
    """Checking the hashes fails no frame of an undamaged clip (each picture matches its hash)."""
    clean = _hevc(tmp_path / "c.mp4", ":hash=1")
    assert len(_packets(clean)) == N
    with VideoReader(clean) as reader:
        assert np.array_equal(reader.read(range(N)), np.stack([f for _, f in sorted(_plain(clean).items())]))
