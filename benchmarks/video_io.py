"""Video I/O speed: sparse sampling against full decoding, and clip-suite rendering cost.

Prints ``name: value`` lines, all measured in this run:

* ``sample32_vs_full_decode``: median time of ``read_frames(clip, uniform_indices(1000, 32))`` over
  the median time of ``read_all_frames(clip)`` (every frame decoded and converted to an RGB
  ndarray), paired repeats on the same file. The clip is 1,000 frames of 256x256 moving
  gradients, H.264 (libx264, crf 18) with a keyframe every 32 frames, a realistic GOP for
  robot-learning clips (recorders and dataset tools commonly use 1-2 s GOPs at 16-30 fps).
  Both sides include opening and probing the file. Target <= 0.6.
* ``sample32_vs_full_decode_gop250``: the same on a clip encoded with libx264's default GOP
  (250): there are only 4 keyframes, so the sampler cannot skip decoding and the saving comes
  from converting only the 32 wanted frames. Reported for honesty, no target.
* ``clipsuite_seconds_per_clip``: mean wall time to render (``evals.clipsuite.render_clip``) and
  write (``write_video``) the first ``--clips`` clips of ``suite_specs("small", 0)``, or
  ``unavailable (<reason>)`` when the clip suite cannot be imported or rendered.

Usage: ``python benchmarks/video_io.py [--repeats N] [--clips N]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from tools.video import read_all_frames, read_frames, uniform_indices, write_video


def moving_clip(frames: int = 1000, size: int = 256) -> np.ndarray:
    """Smoothly moving colour gradients with a drifting square: compresses like real footage."""
    yy, xx = np.mgrid[0:size, 0:size]
    out = np.empty((frames, size, size, 3), np.uint8)
    for t in range(frames):
        out[t, ..., 0] = (xx + 2 * t) % 256
        out[t, ..., 1] = (yy + t) % 256
        out[t, ..., 2] = (xx + yy + 3 * t) % 256 // 2
        x0 = (5 * t) % (size - 40)
        out[t, 100:140, x0:x0 + 40] = (255, 255, 255)
    return out


def ratio(path: Path, repeats: int) -> float:
    """Median sample-32 time over median full-decode time (paired, alternating repeats)."""
    n = 1000
    indices = uniform_indices(n, 32)
    sample, full = [], []
    read_frames(path, indices)  # warm the page cache and imports for both sides
    for _ in range(repeats):
        t0 = time.perf_counter()
        frames = read_frames(path, indices)
        t1 = time.perf_counter()
        everything = read_all_frames(path)
        t2 = time.perf_counter()
        assert frames.shape[0] == 32 and everything.shape[0] == n
        sample.append(t1 - t0)
        full.append(t2 - t1)
    return statistics.median(sample) / statistics.median(full)


def clipsuite_seconds(clips: int, out_dir: Path) -> str:
    try:
        from evals.clipsuite import render_clip, suite_specs
    except Exception as exc:  # noqa: BLE001 - report any import failure as a value
        return f"unavailable ({type(exc).__name__}: {exc})"
    try:
        specs = suite_specs("small", 0)[:clips]
        t0 = time.perf_counter()
        for spec in specs:
            write_video(out_dir / f"{spec.name}.mp4", render_clip(spec), fps=spec.fps)
        return f"{(time.perf_counter() - t0) / max(1, len(specs)):.3f}"
    except Exception as exc:  # noqa: BLE001 - e.g. no MuJoCo GL backend on this machine
        return f"unavailable ({type(exc).__name__}: {exc})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--clips", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("MUJOCO_GL", "egl")  # headless rendering, as in the test suite
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
    with tempfile.TemporaryDirectory() as tmp:
        tmp_dir = Path(tmp)
        frames = moving_clip()
        gop32 = write_video(tmp_dir / "gop32.mp4", frames, fps=16, gop=32)
        gop250 = write_video(tmp_dir / "gop250.mp4", frames, fps=16)
        del frames
        print(f"sample32_vs_full_decode: {ratio(gop32, args.repeats):.3f}")
        print(f"sample32_vs_full_decode_gop250: {ratio(gop250, args.repeats):.3f}")
        print(f"clipsuite_seconds_per_clip: {clipsuite_seconds(args.clips, tmp_dir)}")


if __name__ == "__main__":
    main()
