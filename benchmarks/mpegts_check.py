"""Cost of the MPEG-TS checks of the scan: every PES start on the video PID (`tools.mpegts_pes.untrusted_from`) and
the video's timestamps (`tools.mpegts_timeline.check_timeline`).

Prints ``name: value`` lines, all measured in this run on one clip: ``--frames`` frames of 256x256 moving gradients
(``benchmarks.video_io.moving_clip``), libx264 crf 18, a keyframe every 32 frames, 16 fps, with an MP2 audio track (its
own PID, whose packets the check also walks past), muxed by FFmpeg's MPEG-TS muxer:

* ``transport_packets``: the file's 188-byte packets; ``video_packets``: its demuxed video packets.
* ``ts_check_seconds``: median time of the two checks alone, given the scan's (offset, dts, pts) rows (read once
  beforehand); ``ts_check_seconds_per_packet``: that over ``transport_packets``.
* ``ts_probe_seconds_with_check`` / ``..._without_check``: median time of ``tools.video.probe`` (open the file and its
  one demux pass, the scan), as shipped and with the two checks replaced by no-ops (the scan still keeps its rows),
  paired repeats alternating; ``ts_probe_with_vs_without_check``: their ratio.

Usage: ``python -P benchmarks/mpegts_check.py [--repeats N] [--frames N]`` (with the repository on ``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import av
import numpy as np

from benchmarks.video_io import moving_clip
from tools import video_scan
from tools.mpegts_pes import untrusted_from
from tools.mpegts_timeline import check_timeline
from tools.video import probe

RATE = 16
SAMPLE_RATE = 48000


def ts_clip(path: Path, frames: int) -> Path:
    """The benchmark's clip (module docstring) at ``path``."""
    with av.open(str(path), "w", format="mpegts") as c:
        video = c.add_stream("libx264", rate=RATE)
        video.width, video.height, video.pix_fmt = 256, 256, "yuv420p"
        video.options = {"crf": "18", "x264-params": "keyint=32:min-keyint=32:scenecut=0:log-level=error"}
        audio = c.add_stream("mp2", rate=SAMPLE_RATE)
        audio.layout = "mono"
        rng, samples = np.random.default_rng(0), 0
        for k, f in enumerate(moving_clip(frames, 256)):
            c.mux(video.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
            while samples < (k + 1) * SAMPLE_RATE // RATE:
                noise = (rng.standard_normal(1152) * 3000).astype(np.int16)[None]
                frame = av.AudioFrame.from_ndarray(noise, format="s16", layout="mono")
                frame.sample_rate, frame.pts, samples = SAMPLE_RATE, samples, samples + 1152
                c.mux(audio.encode(frame))
        c.mux(video.encode())
        c.mux(audio.encode())
    return path


def rows(path: Path) -> tuple[int, list[tuple[int | None, int | None, int | None]]]:
    """The video PID and the scan's (byte offset, dts, pts) row of each demuxed video packet."""
    with av.open(str(path)) as c:
        stream = c.streams.video[0]
        return stream.id, [(p.pos, p.dts, p.pts) for p in c.demux(stream) if p.size]


def check(path: Path, pid: int, heads: list[tuple[int | None, int | None, int | None]],
          ordered: list[int]) -> None:
    """The scan's two MPEG-TS checks, as it makes them."""
    check_timeline(path.name, heads)
    assert untrusted_from(path, pid, heads, ordered) is None  # an undamaged clip


@contextmanager
def without_check() -> Iterator[None]:
    """The scan with its MPEG-TS checks replaced by no-ops."""
    saved = video_scan.untrusted_from, video_scan.check_timeline
    video_scan.untrusted_from, video_scan.check_timeline = (lambda *_: None), (lambda *_: None)
    try:
        yield
    finally:
        video_scan.untrusted_from, video_scan.check_timeline = saved


def timed(run: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    run()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--frames", type=int, default=600)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = ts_clip(Path(tmp) / "clip.ts", args.frames)
        packets = path.stat().st_size // 188
        pid, heads = rows(path)
        ordered = sorted(p for _, _, p in heads if p is not None)
        assert probe(path).frames == len(heads) == args.frames
        check(path, pid, heads, ordered)  # warm the page cache and imports
        alone = [timed(lambda: check(path, pid, heads, ordered)) for _ in range(args.repeats)]
        with_check, without = [], []
        for _ in range(args.repeats):
            with_check.append(timed(lambda: probe(path)))
            with without_check():
                without.append(timed(lambda: probe(path)))
        seconds = statistics.median(alone)
        print(f"transport_packets: {packets}")
        print(f"video_packets: {len(heads)}")
        print(f"ts_check_seconds: {seconds:.5f}")
        print(f"ts_check_seconds_per_packet: {seconds / packets:.3e}")
        print(f"ts_probe_seconds_with_check: {statistics.median(with_check):.4f}")
        print(f"ts_probe_seconds_without_check: {statistics.median(without):.4f}")
        print(f"ts_probe_with_vs_without_check: {statistics.median(with_check) / statistics.median(without):.3f}")


if __name__ == "__main__":
    main()
