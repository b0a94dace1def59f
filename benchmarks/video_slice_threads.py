"""Decoder threads for multi-slice H.264 (PyAV's own writes, ``write_video``, carry one slice per encoder thread):
``VideoReader.read`` wall and CPU time with each threading the reader could give such a clip.

Variants: ``slice`` (FFmpeg's slice threads, its automatic count: they hide a damaged slice, flagging nothing:
tools/video_slices.py), ``frame`` (frame threads, "AUTO") and ``one`` (one thread). Each is set on the reads'
decoder after the reader's own choice, so the runs differ in that alone; the repeats interleave the variants.
Clips: ``write_video`` of moving gradients at 256x256 x 33 frames and 480x832 (HxW) x 81 frames. Reads: every frame,
and 8 uniform indices (``uniform_indices``). Prints one line per clip, read and variant: median wall and CPU
(``time.process_time``, every thread of the process) in ms over the repeats.

Usage: ``python -m benchmarks.video_slice_threads [--repeats N]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from tools import video_reader
from tools.video import VideoReader, uniform_indices, write_video
from tools.video_scan import video_stream

VARIANTS = {"slice": ("SLICE", 0), "frame": ("AUTO", 0), "one": ("SLICE", 1)}


def moving(frames: int, height: int, width: int) -> np.ndarray:
    yy, xx = np.mgrid[0:height, 0:width]
    out = np.empty((frames, height, width, 3), np.uint8)
    for t in range(frames):
        out[t, ..., 0] = (xx + 2 * t) % 256
        out[t, ..., 1] = (yy + t) % 256
        out[t, ..., 2] = (xx + yy + 3 * t) % 256 // 2
        x0 = (5 * t) % (width - 40)
        out[t, height // 3:height // 3 + 40, x0:x0 + 40] = 255
    return out


def threaded(variant: str):  # noqa: ANN201
    kind, count = VARIANTS[variant]

    def opened(container, name, slices=None):  # noqa: ANN001, ANN202
        stream = video_stream(container, name, slices)
        stream.thread_type = kind
        stream.codec_context.thread_count = count
        return stream

    return opened


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for frames, height, width in ((33, 256, 256), (81, 480, 832)):
                path = write_video(Path(tmp) / f"{height}x{width}.mp4", moving(frames, height, width), fps=16)
                with VideoReader(path) as probe:
                    slices = probe._order[0].slices
                for label, indices in (("all", list(range(frames))), ("u8", uniform_indices(frames, 8))):
                    times: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
                    reference = None
                    for r in range(args.repeats + 1):
                        for variant in VARIANTS:
                            video_reader.video_stream = threaded(variant)
                            with VideoReader(path) as reader:
                                w0, c0 = time.perf_counter(), time.process_time()
                                got = reader.read(indices)
                                w1, c1 = time.perf_counter(), time.process_time()
                            reference = got if reference is None else reference
                            assert np.array_equal(got, reference)
                            if r:  # (the first round warms the page cache and imports)
                                times[variant].append((w1 - w0, c1 - c0))
                    for variant, runs in times.items():
                        wall = statistics.median(w for w, _ in runs) * 1e3
                        cpu = statistics.median(c for _, c in runs) * 1e3
                        print(f"{height}x{width}x{frames} ({slices} slices) read {label} {variant}: "
                              f"wall {wall:.1f} ms, cpu {cpu:.1f} ms")
    finally:  # (the reads' decoder set up as the reader does again, whatever failed)
        video_reader.video_stream = video_stream


if __name__ == "__main__":
    main()
