"""A clip without usable timestamps (a raw HEVC stream) damaged in one packet, decoded with frame threads: after the
failed packet the decoder puts frames out of order (frame 2 before frame 1), and the reader, which counts the decoder's
output there, has no timestamp to see it by. No read hands out a frame unlike the clean clip's."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from tests.test_video_concealed import _gradient_ids, failed_reads, frame_threaded_reads
from tools.video import VideoDecodeError, VideoReader

N = 40


def _raw_hevc(path: Path) -> Path:
    """A 40-frame raw HEVC stream (x265, picture hashes, keyframes at 0, 12, 24, 36, B-frames): no timestamps."""
    with av.open(str(path), "w", format="hevc") as c:
        s = c.add_stream("libx265", rate=16)
        s.width, s.height, s.pix_fmt = 96, 96, "yuv420p"
        s.options = {"x265-params": "keyint=12:min-keyint=12:log-level=error:hash=1"}
        for f in _gradient_ids(N):
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
    return path


def _slices(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each slice NAL unit (VCL, type < 32) of an Annex B stream, its start code and the zero bytes
    after it left out: one a picture, in decode order."""
    starts, at = [], data.find(b"\x00\x00\x01")
    while at >= 0:
        starts.append(at + 3)
        at = data.find(b"\x00\x00\x01", at + 3)
    out = []
    for k, start in enumerate(starts):
        end = starts[k + 1] - 3 if k + 1 < len(starts) else len(data)
        while end > start and data[end - 1] == 0:
            end -= 1
        if (data[start] >> 1) & 0x3F < 32:
            out.append((start, end))
    return out


def _damaged(clean: Path, picture: int) -> Path:
    """``clean`` with the second half of its ``picture``-th slice (decode order) zeroed: it fails its hash."""
    data = bytearray(clean.read_bytes())
    start, end = _slices(bytes(data))[picture]
    half = (end - start) // 2
    data[start + half:end] = bytes(end - start - half)
    path = clean.with_name(f"bad{picture}{clean.suffix}")
    path.write_bytes(bytes(data))
    return path


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    clean = _raw_hevc(tmp_path_factory.mktemp("raw") / "c.hevc")
    with av.open(str(clean)) as c:
        plain = np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])
    assert len(plain) == N
    return clean, plain


@pytest.mark.parametrize("threads", [2, 8])
@pytest.mark.parametrize("picture", [3, 22])
def test_untimed_frames_out_of_order_after_a_failed_packet_are_not_handed_out(clips, monkeypatch, threads, picture):
    """Picture 3 (frame 1, a B-frame) or 22 (frame 20) fails its hash. Counting the output, iter_frames handed out
    frame 2 as frame 1 (2 threads), and read() frames 20, 21, 23-26 (8 threads, picture 22) as other frames' pictures,
    no error. Now every frame handed out is the clean clip's, and the read of the damaged frame fails; frames that
    came out before the failed packet went in still read."""
    clean, plain = clips
    frame_threaded_reads(monkeypatch, threads)
    bad = _damaged(clean, picture)
    with VideoReader(bad) as reader:
        assert reader._order[1] is None  # (the premise: no timestamps, the output counted)
        with pytest.raises(VideoDecodeError, match="corrupt data"):
            for i, frame in reader.iter_frames():
                assert np.array_equal(reader.to_rgb(frame), plain[i]), i
        failed = failed_reads(reader, plain)
        assert picture - 2 in failed
        if picture == 22:  # (the frames of the GOP before, out before the failed packet went in, read)
            assert not set(range(12)) & set(failed), failed
