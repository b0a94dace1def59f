"""Video I/O: bad inputs from issue 2, index mapping (seek, VFR), bounded memory, and pure helpers."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tracemalloc
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from tools import video as V
from tools.video import (
    EmptyVideoError,
    FrameIndexError,
    VideoDecodeError,
    VideoError,
    VideoNotFoundError,
    VideoReader,
    probe,
    read_all_frames,
    read_frames,
    uniform_indices,
    write_video,
)
from tools.video_seek import SeekMissed

REPO = Path(__file__).resolve().parents[1]


def id_frames(n: int, h: int = 64, w: int = 64, bits: int = 8) -> np.ndarray:
    """Frame t shows t in binary as `bits` vertical black/white stripes (robust to compression)."""
    stripe = w // bits
    t = np.arange(n)[:, None]
    on = ((t >> np.arange(bits)[None, :]) & 1).astype(np.uint8) * 255  # [n, bits]
    row = np.zeros((n, w), np.uint8)
    row[:, : stripe * bits] = np.repeat(on, stripe, axis=1)
    return np.ascontiguousarray(np.broadcast_to(row[:, None, :, None], (n, h, w, 3)))


def write_elementary(path: Path, codec: str, params: str, n: int) -> Path:
    """A raw elementary stream (no container, so no timestamps: the reader counts the decoder's output) of `n` 64x64
    id frames at 16 fps, encoded by `codec` ("libx264" or "libx265") with its `params` ("x264-params" /
    "x265-params")."""
    with av.open(str(path), "w", format={"libx264": "h264", "libx265": "hevc"}[codec]) as c:
        s = c.add_stream(codec, rate=16)
        s.width, s.height, s.pix_fmt = 64, 64, "yuv420p"
        s.options = {f"{codec[3:]}-params": params}
        for f in id_frames(n):
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())
    return path


def read_ids(frames: np.ndarray, bits: int = 8) -> list[int]:
    w = frames.shape[2]
    stripe = w // bits
    centres = frames[:, :, stripe // 2 :: stripe][:, :, :bits].mean(axis=(1, 3))  # [K, bits]
    return [int(sum(1 << b for b in range(bits) if row[b] > 127)) for row in centres]


def write_raw(path: Path, frames: np.ndarray, *, rate: int = 16, pix_fmt: str = "yuv420p", gop: int = 12,
              options: dict | None = None, pts_ms: list[int] | None = None) -> Path:
    """Mux with PyAV directly (container options, explicit timestamps)."""
    with av.open(str(path), "w", options=options or {}) as c:
        s = c.add_stream("libx264", rate=rate)
        s.width, s.height, s.pix_fmt = frames.shape[2], frames.shape[1], pix_fmt
        s.codec_context.gop_size = gop
        if pts_ms is not None:
            s.codec_context.time_base = Fraction(1, 1000)
        for i, f in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(f, format="rgb24")
            if pts_ms is not None:
                frame.pts, frame.time_base = pts_ms[i], Fraction(1, 1000)
            for p in s.encode(frame):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


@pytest.fixture(scope="module")
def gop_clip(tmp_path_factory) -> Path:
    """120 frames, keyframe every 8: exercises the keyframe-seeking sampler and B-frame reordering."""
    return write_video(tmp_path_factory.mktemp("v") / "ids.mp4", id_frames(120), fps=16, gop=8)


# ----------------------------------------------------------------------------- bad input (issue 2)

def test_missing_file_is_typed(tmp_path):
    path = tmp_path / "nope.mp4"
    for call in (lambda: probe(path), lambda: read_frames(path, [0]), lambda: read_all_frames(path)):
        with pytest.raises(VideoNotFoundError, match="nope.mp4.*not found"):
            call()


def test_directory_is_not_a_video(tmp_path):
    with pytest.raises(VideoNotFoundError, match="is a directory, not a video file"):
        probe(tmp_path)


def test_zero_bytes_file_and_bytes(tmp_path):
    path = tmp_path / "empty.mp4"
    path.write_bytes(b"")
    with pytest.raises(EmptyVideoError, match=r"empty.mp4.*0 bytes"):
        probe(path)
    with pytest.raises(EmptyVideoError, match="0 bytes"):
        read_frames(b"", [0])


def test_truncated_mp4_moov_at_end(tmp_path, gop_clip):
    data = gop_clip.read_bytes()
    path = tmp_path / "cut.mp4"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(VideoDecodeError, match="cut.mp4.*cannot be opened") as info:
        probe(path)
    assert isinstance(info.value.__cause__, av.error.FFmpegError)  # wrapped, not leaked
    with pytest.raises(VideoDecodeError):
        read_frames(data[: len(data) // 2], [0])


def test_truncated_mp4_faststart_is_reported(tmp_path):
    full = write_raw(tmp_path / "fs.mp4", id_frames(60), options={"movflags": "faststart"})
    data = full.read_bytes()
    cut = tmp_path / "fs_cut.mp4"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(VideoDecodeError, match=r"fs_cut.mp4: truncated file.*declares 60 samples"):
        probe(cut)
    assert probe(full).frames == 60


def test_text_file_named_mp4(tmp_path):
    path = tmp_path / "notes.mp4"
    path.write_text("this is not a video\n" * 20)
    with pytest.raises(VideoDecodeError, match=r"notes.mp4: cannot be opened as a video"):
        read_frames(path, [0])
    with pytest.raises(VideoDecodeError, match=r"<400 bytes>"):
        probe(path.read_bytes())


def test_audio_only_file_has_no_video_stream(tmp_path):
    path = tmp_path / "tone.wav"
    with av.open(str(path), "w") as c:
        s = c.add_stream("pcm_s16le", rate=8000)
        frame = av.AudioFrame.from_ndarray(np.zeros((1, 800), np.int16), format="s16", layout="mono")
        frame.sample_rate = 8000
        for p in s.encode(frame):
            c.mux(p)
        for p in s.encode():
            c.mux(p)
    with pytest.raises(VideoDecodeError, match="tone.wav: contains no video stream"):
        probe(path)


def test_one_frame_video(tmp_path):
    path = write_video(tmp_path / "one.mp4", id_frames(1) + 40, fps=16)
    meta = probe(path)
    assert (meta.frames, meta.width, meta.height, meta.fps) == (1, 64, 64, 16.0)
    assert meta.duration == pytest.approx(1 / 16)
    assert read_frames(path, uniform_indices(meta.frames, 32)).shape == (1, 64, 64, 3)
    assert read_all_frames(path).shape == (1, 64, 64, 3)
    with pytest.raises(FrameIndexError, match=r"one.mp4: frame index 1 is out of range for a 1-frame"):
        read_frames(path, [1])


@pytest.mark.parametrize(("codec", "suffix"), [("ffv1", "mkv"), ("libx264", "mp4")])
def test_grayscale_source_gives_rgb(tmp_path, codec, suffix):
    gray = np.stack([np.full((48, 80), 30 + 40 * t, np.uint8) for t in range(5)])
    path = write_video(tmp_path / f"gray.{suffix}", gray, codec=codec, pix_fmt="gray")
    meta = probe(path)  # ffv1/mkv declares 0 frames: the count comes from demuxing
    assert (meta.frames, meta.width, meta.height) == (5, 80, 48)
    frames = read_frames(path, [4, 0])
    assert frames.dtype == np.uint8 and frames.shape == (2, 48, 80, 3)
    assert np.array_equal(frames[..., 0], frames[..., 1]) and np.array_equal(frames[..., 1], frames[..., 2])
    assert abs(frames[0].mean() - 190) < 4 and abs(frames[1].mean() - 30) < 4


def test_odd_size_97x61(tmp_path):
    frames = id_frames(10, h=61, w=97)
    path = write_video(tmp_path / "odd.mp4", frames, pix_fmt="yuv444p")
    meta = probe(path)
    assert (meta.width, meta.height, meta.frames) == (97, 61, 10)
    got = read_frames(path, [9, 3])
    assert got.shape == (2, 61, 97, 3) and got.dtype == np.uint8
    assert read_ids(got) == [9, 3]


def test_4k_frame(tmp_path):
    frames = np.zeros((3, 2160, 3840, 3), np.uint8)
    frames[1, :, :1920] = 200
    path = write_video(tmp_path / "uhd.mp4", frames, preset="ultrafast")
    meta = probe(path)
    assert (meta.width, meta.height, meta.frames) == (3840, 2160, 3)
    one = read_frames(path, [1])
    assert one.shape == (1, 2160, 3840, 3)
    assert one[0, :, :1900].mean() > 190 and one[0, :, 1940:].mean() < 10


def test_variable_frame_rate_index_mapping(tmp_path):
    n = 40
    pts_ms = np.cumsum([0] + [90 if i % 3 == 0 else 20 for i in range(n - 1)]).tolist()
    path = write_raw(tmp_path / "vfr.mp4", id_frames(n), rate=30, gop=10, pts_ms=pts_ms)
    meta = probe(path)
    assert meta.frames == n
    assert meta.duration == pytest.approx(pts_ms[-1] / 1000, abs=0.1)
    assert meta.fps > 0
    idx = [0, 1, 2, 3, 17, 18, 30, 39]
    assert read_ids(read_frames(path, idx)) == idx
    assert read_ids(read_all_frames(path)) == list(range(n))


# ----------------------------------------------------------------------------- sampling correctness

def test_sampling_matches_full_decode_and_ground_truth(gop_clip):
    full = read_all_frames(gop_clip)
    assert read_ids(full) == list(range(120))
    rng = np.random.default_rng(0)
    for _ in range(4):
        idx = rng.integers(0, 120, size=15).tolist()  # unordered, with repeats
        got = read_frames(gop_clip, idx)
        assert read_ids(got) == idx
        assert np.array_equal(got, full[idx])
    idx = uniform_indices(120, 32)
    assert np.array_equal(read_frames(gop_clip.read_bytes(), idx), full[idx])


def test_read_list_gives_separate_contiguous_frames_equal_to_read(tmp_path, gop_clip):
    idx = [37, 3, 100, 3, 64]
    with VideoReader(gop_clip) as reader:
        frames = reader.read_list(idx)
        assert read_ids(np.stack(frames)) == idx
        assert np.array_equal(np.stack(frames), reader.read(idx))
        assert frames[1] is frames[3] and reader.read_list([]) == []
    distinct = [frames[k] for k in (0, 1, 2, 4)]
    assert not any(np.shares_memory(a, b) for k, a in enumerate(distinct) for b in distinct[k + 1:])
    odd = write_video(tmp_path / "odd.mp4", id_frames(6, h=61, w=97), pix_fmt="yuv444p")
    with VideoReader(odd) as reader:  # rows of 291 bytes: FFmpeg pads them, the list's arrays are not
        got = reader.read_list([5, 0])
    assert all(f.flags["C_CONTIGUOUS"] and f.shape == (61, 97, 3) for f in got) and read_ids(np.stack(got)) == [5, 0]
    reader.close()
    with pytest.raises(VideoError, match="reader is closed"):
        reader.read_list([0])


def test_first_read_reuses_the_scan_demuxer_with_identical_frames(gop_clip, monkeypatch):
    """The scan's container, rewound, serves the first read (one av.open fewer per clip); frames
    are the same as through a freshly opened container, whichever frames the first read wants."""
    import av

    opened = []
    real_open = av.open
    monkeypatch.setattr(av, "open", lambda *a, **k: opened.append(1) or real_open(*a, **k))
    full = read_all_frames(gop_clip)
    for first in ([0, 1, 2], [100, 5, 117], list(range(120))):
        opened.clear()
        reader = VideoReader(gop_clip)
        got = reader.read(first)
        assert len(opened) == 1  # the scan's open only
        assert read_ids(got) == first and np.array_equal(got, full[first])
        again = reader.read(first)  # later reads open their own demuxer
        assert len(opened) == 2 and np.array_equal(again, got)
        reader.close()


def test_an_unused_scan_demuxer_is_closed_with_the_reader(gop_clip):
    reader = VideoReader(gop_clip)
    spare = reader._spare
    assert spare is not None
    reader.close_spare()
    assert reader._spare is None
    with pytest.raises(Exception):  # noqa: B017 - PyAV raises its own error type on a closed container
        next(spare.demux(spare.streams.video[0]))
    assert read_ids(reader.read([3])) == [3]  # reads still work, through a new demuxer
    reader.close()
    with pytest.raises(VideoError, match="closed"):
        reader.read([3])


def test_sampler_skips_gops(gop_clip, monkeypatch):
    decoded = []
    original = VideoReader._packets_to_frames

    def counting(self, *args):
        for frame in original(self, *args):
            decoded.append(frame.pts)
            yield frame

    monkeypatch.setattr(VideoReader, "_packets_to_frames", counting)
    assert read_ids(read_frames(gop_clip, [5, 100, 117])) == [5, 100, 117]
    assert len(decoded) < 40  # sequential decoding would need 118 frames


def test_bad_indices_are_typed(gop_clip):
    with VideoReader(gop_clip) as reader:
        for bad in ([-1], [120], [1.5], [True], ["3"]):
            with pytest.raises(FrameIndexError, match="ids.mp4"):
                reader.read(bad)
        assert reader.read([]).shape == (0, 64, 64, 3)
        assert reader.read(np.array([2, 2], dtype=np.int64)).shape == (2, 64, 64, 3)
    with pytest.raises(VideoError, match="closed"):
        reader.read([0])


def test_read_all_frames_max_frames(gop_clip):
    assert read_ids(read_all_frames(gop_clip, max_frames=5)) == [0, 1, 2, 3, 4]
    assert read_all_frames(gop_clip, max_frames=0).shape == (0, 64, 64, 3)
    with pytest.raises(ValueError):
        read_all_frames(gop_clip, max_frames=-1)


def test_sampling_does_not_hold_the_clip(tmp_path):
    """numpy allocations are traced: 8 of 300 frames must not allocate the whole clip (14.7 MB)."""
    path = write_video(tmp_path / "long.mp4", id_frames(300, h=128, w=128), gop=32, preset="ultrafast")
    tracemalloc.start()
    try:
        frames = read_frames(path, uniform_indices(300, 8))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert frames.shape == (8, 128, 128, 3)
    assert peak < 3_000_000


@pytest.mark.slow
def test_10000_frames_bounded_rss(tmp_path):
    path = write_video(tmp_path / "long.mp4", id_frames(10_000, h=256, w=256, bits=14), gop=32,
                       preset="ultrafast")
    script = textwrap.dedent(f"""
        import json, sys
        from tools.video import read_frames, uniform_indices, probe
        def rss(key):
            for line in open("/proc/self/status"):
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
        meta = probe({str(path)!r})
        base = rss("VmRSS:")
        idx = uniform_indices(meta.frames, 32)
        frames = read_frames({str(path)!r}, idx)
        print(json.dumps({{"frames": meta.frames, "extra": rss("VmHWM:") - base, "idx": idx,
                          "shape": list(frames.shape), "data": frames[:, 0, :, 0].tolist()}}))
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True,
                         timeout=300, check=True)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["frames"] == 10_000 and res["shape"] == [32, 256, 256, 3]
    print(f"peak extra RSS {res['extra'] / 2**20:.1f} MB")
    assert res["extra"] < 200 * 2**20, f"peak extra RSS {res['extra'] / 2**20:.0f} MB"
    rows = np.array(res["data"], np.uint8)[:, None, :, None].repeat(3, axis=3)
    assert read_ids(rows, bits=14) == res["idx"]


def test_fallback_paths_keep_index_mapping(gop_clip, monkeypatch):
    """Sequential decoding (no usable timestamps) and the retry after a missed seek give the same frames."""
    idx = [3, 64, 119, 3]
    with VideoReader(gop_clip) as reader:
        reader._order = (V.FrameIndex(None, ()), None)
        assert read_ids(reader.read(idx)) == idx
    original = VideoReader._decode

    def missing_seek(self, wanted, *, allow_seek):
        if allow_seek:
            raise SeekMissed
        return original(self, wanted, allow_seek=allow_seek)

    monkeypatch.setattr(VideoReader, "_decode", missing_seek)
    assert read_ids(read_frames(gop_clip, idx)) == idx


def test_rgb_conversion_with_a_reused_context_matches_pyav_per_frame(tmp_path):
    """The per-thread swscale context must give PyAV's own per-frame conversion bit for bit, also when
    clips of different sizes and pixel formats alternate on one thread and when threads convert at once."""
    import threading

    rng = np.random.default_rng(3)
    clips = [write_raw(tmp_path / f"c{k}.mp4", rng.integers(0, 255, (6, h, w, 3), dtype=np.uint8), pix_fmt=fmt)
             for k, (h, w, fmt) in enumerate([(64, 80, "yuv420p"), (61, 97, "yuv444p"), (64, 80, "yuv420p")])]

    def reference(path: Path) -> np.ndarray:
        with av.open(str(path)) as f:
            return np.stack([fr.to_ndarray(format="rgb24") for fr in f.decode(video=0)])

    want = [reference(c) for c in clips]
    for c, w in zip(clips + clips[::-1], want + want[::-1], strict=True):
        np.testing.assert_array_equal(read_all_frames(c), w)
    got: dict[int, list[np.ndarray]] = {}
    threads = [threading.Thread(target=lambda k=k: got.__setitem__(k, [read_all_frames(c) for c in clips]))
               for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for frames in got.values():
        for g, w in zip(frames, want, strict=True):
            np.testing.assert_array_equal(g, w)
