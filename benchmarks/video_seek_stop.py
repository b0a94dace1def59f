"""Seek reads of an H.264 open-GOP clip with frame threads: what skipping the leading pictures a seek's decoder drops
saves (``tools.video_feed.LEADING_SKIPPED``).

After a seek to a non-IDR keyframe FFmpeg's H.264 decoder drops the keyframe's leading B-frames (no frame, no error);
a frame handed out waited on them, so with frame threads (which cannot be flushed) the settle decoded on
``DROP_HORIZON`` (48) frames or to the end of the clip. Variants: ``skip`` (as shipped) and ``wait`` (H.264 taken out of
``LEADING_SKIPPED``: the behaviour before). The clip: ``--frames`` frames of moving gradients at 640x480 (frame
threads, the reader's own choice), libx264 ``open-gop=1``, a keyframe every ``--gop`` frames, 3 B-frames. Reads: one
reader, each of ``--reads`` single frames uniform over the clip read alone (a seek each), in a shuffled order; the
repeats interleave the variants. Prints per variant the median wall time of the whole pattern in ms, its CPU time
(``time.process_time``, every thread of the process) and the packets fed to the decoders.

Usage: ``python -m benchmarks.video_seek_stop [--repeats N] [--frames N] [--gop N] [--reads N]``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

import av
import numpy as np

from benchmarks.video_io import moving_clip
from tools import video_feed
from tools.video import VideoReader, uniform_indices

VARIANTS = {"skip": video_feed.LEADING_SKIPPED, "wait": video_feed.LEADING_SKIPPED - {"h264"}}


def _clip(path: Path, frames: int, gop: int) -> Path:
    big = np.repeat(np.repeat(moving_clip(frames, 256), 2, axis=1), 3, axis=2)[:, :480, :640]
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx264", rate=30)
        s.width, s.height, s.pix_fmt = 640, 480, "yuv420p"
        s.options = {"x264-params": f"open-gop=1:keyint={gop}:min-keyint={gop}:scenecut=0:bframes=3:log-level=error"}
        for f in big:
            c.mux(s.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(f), format="rgb24")))
        c.mux(s.encode())
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--gop", type=int, default=30)
    parser.add_argument("--reads", type=int, default=16)
    args = parser.parse_args()
    fed = [0]
    tag = video_feed.tag_packet

    def counted(*a, **k):  # noqa: ANN002, ANN003, ANN202
        fed[0] += 1
        return tag(*a, **k)

    video_feed.tag_packet = counted
    order = list(uniform_indices(args.frames, args.reads))
    random.Random(0).shuffle(order)
    wall: dict[str, list[float]] = {v: [] for v in VARIANTS}
    cpu: dict[str, list[float]] = {v: [] for v in VARIANTS}
    packets: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = _clip(Path(tmp) / "open.mp4", args.frames, args.gop)
        got: dict[str, list[np.ndarray]] = {}
        for rep in range(args.repeats + 1):  # (the first round warms the page cache and imports)
            for name in (VARIANTS if rep % 2 else reversed(VARIANTS)):
                video_feed.LEADING_SKIPPED = VARIANTS[name]
                fed[0] = 0
                with VideoReader(path) as reader:
                    reader.read([0])  # (the scan's demuxer taken: every timed read seeks on its own)
                    t0, c0 = time.perf_counter(), time.process_time()
                    frames = [reader.read([i])[0] for i in order]
                    t1, c1 = time.perf_counter(), time.process_time()
                got.setdefault(name, frames)
                if rep:
                    wall[name].append((t1 - t0) * 1e3)
                    cpu[name].append((c1 - c0) * 1e3)
                packets[name] = fed[0]
        video_feed.LEADING_SKIPPED = VARIANTS["skip"]
        assert all(np.array_equal(a, b) for a, b in zip(got["skip"], got["wait"], strict=True))
    for name in VARIANTS:
        print(f"{name}: wall {statistics.median(wall[name]):.1f} ms, cpu {statistics.median(cpu[name]):.1f} ms, "
              f"packets fed {packets[name]} ({args.reads} reads)")


if __name__ == "__main__":
    main()
