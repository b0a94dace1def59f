"""Video I/O across containers and codecs: frame identity under seeking, AVI / MPEG-TS / MPEG-PS
timestamps, the header-only stream probe and the decoder reorder depth the scan measures."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import av
import numpy as np
import pytest

from tests.test_video import id_frames, read_ids
from tools import video_scan as S
from tools.video import VideoReader, probe, read_all_frames, read_frames, uniform_indices

N = 40
PYRAMID = {"x264-params": "b-pyramid=normal"}

# (file name, muxer or None for the suffix's, encoder, stream options, max B-frames, GOP)
CASES = [
    ("x264_pyramid.mp4", None, "libx264", PYRAMID, 3, 8),
    ("x264_bframes.avi", None, "libx264", {}, 2, 8),  # AVI keeps decode-order pts
    ("x264.ts", "mpegts", "libx264", {}, 2, 8),  # seeks land by timestamp
    ("mpeg2.ts", "mpegts", "mpeg2video", {"qscale": "2"}, 2, 8),
    ("mpeg2.mpg", "mpeg", "mpeg2video", {"qscale": "2"}, 2, 8),
    ("mpeg4_bframes.avi", None, "mpeg4", {"qscale": "2"}, 2, 8),
    ("x265.mp4", None, "libx265", {"x265-params": "log-level=none:keyint=8"}, None, 8),
    ("vp9.webm", None, "libvpx-vp9", {"deadline": "realtime", "cpu-used": "8"}, None, 8),
]


def _write(path: Path, fmt: str | None, codec: str, options: dict, max_b: int | None, gop: int) -> Path:
    with av.open(str(path), "w", format=fmt) as c:
        s = c.add_stream(codec, rate=16)
        s.width, s.height, s.pix_fmt = 64, 64, "yuv420p"
        s.options = dict(options)
        s.codec_context.gop_size = gop
        if max_b is not None:
            s.codec_context.max_b_frames = max_b
        for f in id_frames(N):
            for p in s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def clip(request, tmp_path_factory) -> Path:
    name, *spec = request.param
    return _write(tmp_path_factory.mktemp("containers") / name, *spec)


def test_every_read_returns_the_frames_it_names(clip):
    """Ground truth is in the pixels (each frame shows its index), whatever the container's timestamps
    say: full decode, sparse reads that seek, unordered reads with repeats, and the last frame alone.
    Before, AVI with B-frames returned neighbours' frames or failed, and TS / PS failed on seeks."""
    assert probe(clip).frames == N
    assert read_ids(read_all_frames(clip)) == list(range(N))
    rng = np.random.default_rng(0)
    reads = [uniform_indices(N, 8), [N - 1], [0], [N - 1, 0, 17], list(range(N)),
             rng.integers(0, N, 12).tolist(), [2], [3], [37, 38, 39]]
    with VideoReader(clip) as reader:  # one reader: later reads after a missed seek or a fallback
        for idx in reads:
            assert read_ids(reader.read(idx)) == idx, idx
    for idx in reads[:4]:  # fresh readers: the first read (the scan's rewound demuxer) each time
        assert read_ids(read_frames(clip, idx)) == idx, idx
    assert read_ids(read_frames(clip.read_bytes(), [5, 30])) == [5, 30]


def test_the_duration_covers_the_frames(clip):
    """MPEG-PS states a duration estimated from its bit rate: 40 frames at 16 fps (2.5 s) probed as 1.5 s, shorter
    than the frames' own timestamps span. A duration is now never shorter than the frames it holds."""
    meta = probe(clip)
    assert meta.duration == pytest.approx(N / 16, abs=0.01)


def test_reorder_depth_hand_computed():
    assert S.reorder_depth([]) == 0
    assert S.reorder_depth([0, 1, 2, 3]) == 0  # no B-frames
    assert S.reorder_depth([0, 3, 1, 2]) == 1  # I0 P3 B1 B2
    assert S.reorder_depth([0, 4, 2, 1, 3]) == 2  # I0 P4 B2 b1 b3 (B-pyramid)
    assert S.reorder_depth([0, 2, 1, 4, 3, 6, 5]) == 1
    assert S.reorder_depth([5, 0, 1, 2, 3, 4]) == 1  # one frame held back for all the others


def test_scan_measures_the_reorder_depth(tmp_path):
    pyramid = _write(tmp_path / "p.mp4", None, "libx264", PYRAMID, 3, 30)
    flat = _write(tmp_path / "f.mp4", None, "libx264", {}, 0, 30)
    with VideoReader(pyramid) as a, VideoReader(flat) as b:
        assert a._order[0].reorder == 2
        assert b._order[0].reorder == 0


def test_reorder_decoder_only_raises_a_smaller_depth(tmp_path):
    path = _write(tmp_path / "p.mp4", None, "libx264", PYRAMID, 3, 30)
    with av.open(str(path)) as c:
        stream = c.streams.video[0]
        stream.codec_context.reorder_depth = 0
        S.reorder_decoder(stream, S.FrameIndex((0,), (0,), 2))
        assert stream.codec_context.reorder_depth == 2
        stream.codec_context.reorder_depth = 4
        S.reorder_decoder(stream, S.FrameIndex((0,), (0,), 2))
        assert stream.codec_context.reorder_depth == 4
        stream.codec_context.reorder_depth = 0
        S.reorder_decoder(stream, S.FrameIndex(None, ()))  # unknown depth: the decoder keeps its own
        assert stream.codec_context.reorder_depth == 0


def test_containers_open_without_the_probe_decode(tmp_path, monkeypatch):
    """Every demuxer a read opens skips FFmpeg's probe decode; the frames match a plain PyAV decode."""
    path = _write(tmp_path / "p.mp4", None, "libx264", PYRAMID, 3, 8)
    with av.open(str(path)) as c:  # FFmpeg's default probe, PyAV's own decode
        reference = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    options = []
    real_open = av.open
    monkeypatch.setattr(av, "open", lambda *a, **k: options.append(k.get("options")) or real_open(*a, **k))
    with VideoReader(path) as reader:
        for idx in ([0, 13, 39], [21], list(range(N))):
            got = reader.read(idx)
            assert all(np.array_equal(g, reference[i]) for g, i in zip(got, idx, strict=True))
    assert len(options) == 3 and all(o == {"skip_frame": "all"} for o in options)


class _FakeContainer:
    def __init__(self, width: int) -> None:
        ctx = SimpleNamespace(width=width, height=48)
        self.streams = SimpleNamespace(video=[SimpleNamespace(codec_context=ctx)])
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_a_stream_without_a_size_in_its_headers_is_reopened_with_the_default_probe(monkeypatch):
    opened = []

    def fake_open(src, name, options):  # noqa: ANN001, ANN202
        opened.append((options, _FakeContainer(0 if options else 64)))
        return opened[-1][1]

    monkeypatch.setattr(S, "_open", fake_open)
    got = S.open_container("clip.mp4", "clip.mp4")
    assert [o for o, _ in opened] == [{"skip_frame": "all"}, None]
    assert opened[0][1].closed and got is opened[1][1] and not got.closed
    opened.clear()
    assert S.open_container("clip.mp4", "clip.mp4", "decode") is opened[0][1]
    assert [o for o, _ in opened] == [None]


def test_avi_decode_order_timestamps_are_found_by_the_scan(tmp_path):
    """x264 in AVI: the codec reorders, the timestamps never do; the reader counts output frames instead."""
    avi = _write(tmp_path / "b.avi", None, "libx264", {}, 2, 8)
    mp4 = _write(tmp_path / "b.mp4", None, "libx264", {}, 2, 8)
    with VideoReader(avi) as a, VideoReader(mp4) as b:
        assert a._order[1] is None and a._order[0].pts is None and a._order[0].keyframes == ()
        assert b._order[1] is not None and b._order[0].reorder >= 1  # real presentation timestamps: kept


def drop_decoded_frame(monkeypatch: pytest.MonkeyPatch, frame_id: int) -> None:
    """Make every VideoReader's decoder skip the frame whose id pattern is `frame_id` (a damaged frame)."""
    original = VideoReader._packets_to_frames

    def dropping(self, *args):
        for frame in original(self, *args):
            if read_ids(frame.to_ndarray(format="rgb24")[None])[0] != frame_id:
                yield frame

    monkeypatch.setattr(VideoReader, "_packets_to_frames", dropping)


def test_a_frame_the_decoder_drops_fails_alone(tmp_path, monkeypatch):
    """A decoder that skips a damaged frame: the others keep their indices (no shift), the lost one is an error."""
    path = _write(tmp_path / "d.mp4", None, "libx264", PYRAMID, 3, 40)
    drop_decoded_frame(monkeypatch, 20)
    with VideoReader(path) as reader:
        assert read_ids(reader.read([5, 19, 21, 39])) == [5, 19, 21, 39]
        with pytest.raises(S.VideoDecodeError, match="frame 20 of 40 could not be decoded"):
            reader.read([20])
        assert read_ids(reader.read([21, 22])) == [21, 22]


def _gapped(path: Path, n: int, pts: list[int], fmt: str | None = None, codec: str = "mpeg4", rate: int = 16) -> Path:
    """`n` id frames at the given timestamps (1/rate units): gaps make a variable-rate clip."""
    from fractions import Fraction

    with av.open(str(path), "w", format=fmt) as c:
        s = c.add_stream(codec, rate=rate)
        s.width, s.height, s.pix_fmt = 64, 64, "yuv420p"
        s.options = {"qscale": "2"} if codec == "mpeg4" else {}
        s.codec_context.time_base = Fraction(1, rate)
        for i, f in enumerate(id_frames(n)):
            frame = av.VideoFrame.from_ndarray(f, format="rgb24")
            frame.pts, frame.time_base = pts[i], Fraction(1, rate)
            c.mux(s.encode(frame))
        c.mux(s.encode())
    return path


def test_avi_with_dropped_frame_chunks_is_complete(tmp_path):
    """FFmpeg's AVI muxer writes an empty chunk per timestamp gap, counted in the declared frames but never
    demuxed: the scan called such a complete file truncated (ineligible), while a cut file still is."""
    pts = [i + (i // 5) * 2 for i in range(30)]  # two frames missing after every fifth
    path = _gapped(tmp_path / "gaps.avi", 30, pts)
    with av.open(str(path)) as c:
        assert c.streams.video[0].frames == 40  # the drop chunks are counted
    meta = probe(path)
    assert meta.frames == 30 and read_ids(read_all_frames(path)) == list(range(30))
    assert [meta.time_of(i) for i in (0, 4, 5, 29)] == [0.0, 4 / 16, 7 / 16, pts[29] / 16]
    data = path.read_bytes()
    cut = tmp_path / "cut.avi"
    cut.write_bytes(data[: len(data) * 2 // 3] + data[-2000:])  # the index survives, the tail of the frames does not
    with pytest.raises(S.VideoDecodeError):
        read_all_frames(cut)


@pytest.mark.parametrize("name", ["vfr.mp4", "vfr.mkv"])
def test_variable_rate_clips_label_frames_by_their_timestamps(tmp_path, name):
    """30 frames 1/16 s apart, then 10 frames 1/2 s apart: labels said t = index / (nominal or average rate),
    seconds off (and past the clip's end in Matroska)."""
    from tools.frames import frame_label

    pts = list(range(30)) + [30 + 8 * k for k in range(1, 11)]
    path = _gapped(tmp_path / name, 40, pts, codec="libx264")
    meta = probe(path)
    assert meta.frames == 40 and meta.time_of(39) == pytest.approx(pts[39] / 16, abs=1e-3)  # mkv: milliseconds
    assert meta.time_of(29) == pytest.approx(29 / 16, abs=1e-3)
    assert meta.fps == pytest.approx(39 / (pts[39] / 16), rel=1e-3)  # the clip's mean rate, not the nominal 16
    assert frame_label(39, meta.frames, meta.fps, meta.time_of(39)) == f"frame 39 of 40, t={pts[39] / 16:.2f}s"
    from evals.report_frames import load_frames

    assert load_frames(str(path), [39]).label(39) == f"frame 39 of 40, t={pts[39] / 16:.2f}s"  # run reports too


@pytest.mark.parametrize("pts", [[40 * i for i in range(12)], [0, 40, 80, 120, 240, 280, 320, 520, 560, 600, 640, 720]])
def test_avi_in_millisecond_timestamps_is_complete(tmp_path, pts):
    """An AVI written with a 1/1000 time base (25 fps, or variable rate) declares its last frame's 40 chunks: 760 +
    40 = 800 "frames", and the scan, which allowed only last timestamp + 1, called the complete clip truncated
    ("declares 800 frames but only 12 could be read"): ineligible."""
    from fractions import Fraction

    path = tmp_path / "ms.avi"
    with av.open(str(path), "w") as c:  # a 25 fps stream, its frames timed in milliseconds
        s = c.add_stream("mpeg4", rate=25)
        s.width, s.height, s.pix_fmt, s.codec_context.time_base = 64, 64, "yuv420p", Fraction(1, 1000)
        for i, f in enumerate(id_frames(12)):
            frame = av.VideoFrame.from_ndarray(f, format="rgb24")
            frame.pts, frame.time_base = pts[i], Fraction(1, 1000)
            c.mux(s.encode(frame))
        c.mux(s.encode())
    with av.open(str(path)) as c:
        assert c.streams.video[0].frames == pts[-1] + 40
    meta = probe(path)
    assert meta.frames == 12 and read_ids(read_all_frames(path)) == list(range(12))
    assert meta.time_of(11) == pytest.approx(pts[-1] / 1000)


def _deep_reorder(path: Path, n: int = 30, depth: int = 20) -> Path:
    """Intra-only H.264 id frames whose timestamps put frame `depth` (decode order) before the `depth` frames
    decoded ahead of it: a reorder no decoder gives (H.264 holds back at most 16 frames)."""
    from fractions import Fraction

    with av.open(str(path), "w") as c:
        s = c.add_stream("libx264", rate=16)
        s.width, s.height, s.pix_fmt, s.time_base = 64, 64, "yuv420p", Fraction(1, 16)
        s.codec_context.gop_size, s.codec_context.max_b_frames = 1, 0
        packets = [p for f in id_frames(n) for p in s.encode(av.VideoFrame.from_ndarray(f, format="rgb24"))]
        packets += s.encode()
        for i, p in enumerate(packets):
            p.dts, p.pts = i, depth + 1 + i if i < depth else depth if i == depth else i + depth
            c.mux(p)
    return path


def test_timestamps_reordering_past_the_decoders_limit_do_not_abort_the_process(tmp_path):
    """The scan measured a reorder depth of 20 from the timestamps and gave it to the H.264 decoder, which aborted
    the whole process (``Assertion pics <= H264_MAX_DPB_FRAMES failed``): one odd or corrupt clip killed a batch or
    the tool service. The depth is capped at 16 and the read fails as a ``VideoDecodeError`` of that clip."""
    import subprocess
    import sys

    path = _deep_reorder(tmp_path / "deep.mkv")
    code = ("import sys\nfrom tools.video import VideoDecodeError, read_all_frames\n"
            "try:\n    read_all_frames(sys.argv[1])\nexcept VideoDecodeError as exc:\n    print('refused:', exc)\n")
    run = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parents[1])
    assert run.returncode == 0, run.stderr[-500:]
    assert run.stdout.startswith(f"refused: {path}: frame 0 of 30 could not be decoded")
    with VideoReader(path) as reader:
        assert reader._order[0].reorder == 20
        with av.open(str(path)) as c:
            S.reorder_decoder(c.streams.video[0], reader._order[0])
            assert c.streams.video[0].codec_context.reorder_depth == 16


def test_demux_ends_where_pyavs_flush_fails_on_a_stream_found_mid_file():
    """PyAV's end-of-demux flush indexes its stream list with the demuxer's new stream count (an MPEG-TS PID found
    after the probe: an IndexError). It escaped the reader as a bare IndexError (an internal fault), after every
    packet had been read."""
    def packets():
        yield from ("p0", "p1", "flush")
        raise IndexError("list index out of range")

    assert list(S.demux(SimpleNamespace(demux=lambda stream: packets()), None)) == ["p0", "p1", "flush"]
