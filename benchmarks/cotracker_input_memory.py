"""Peak memory of CoTracker3's input: the process's peak RSS growth over one `CoTracker3Tracker.track` call on a
random clip, with the real predictor's code (`cotracker.predictor.CoTrackerPredictor`: its resize, scaling and
backward tracking) around a stand-in network that costs next to nothing, so the figure is the video's, not the
network's. It measures the checkout holding the script (put first on ``sys.path``):

    python -P benchmarks/cotracker_input_memory.py --frames 93 --height 720 --width 1280

Prints ``unavailable (<reason>)`` without the ``cotracker`` package.

Frames already at the working shape (``--height 384 --width 512``) are converted into it without a resize: 93 such
frames grew the peak by 857 MiB with the resize and 837 MiB without (2-core VM), 4 working videos of 209 MiB: the
wrapper's, and the predictor's own copies (its same-size resize, its backward pass's ``flip(1).clone()``).

Prints one JSON line: the clip, the working shape and ``peak_rss_growth_mib``. Memory, not time: load-independent
up to the allocator's page reuse; run each tree in its own process (the peak is the process's).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's `tools`, whatever the venv's install points at

from tools.motion import CoTracker3Tracker  # noqa: E402

try:
    from cotracker.predictor import CoTrackerPredictor
except ImportError as exc:  # the optional backend's package
    print(f"unavailable ({type(exc).__name__}: {exc})")
    sys.exit(0)


class _StandIn(torch.nn.Module):
    """The network's call contract at no cost: points stay at their queries, all visible."""

    def forward(self, video, queries, iters):
        t = video.shape[1]
        return queries[:, None, :, 1:].repeat(1, t, 1, 1), torch.ones(queries.shape[:2])[:, None].repeat(1, t, 1), None


class _Predictor(CoTrackerPredictor):
    """The real predictor's code around `_StandIn` (its constructor would build the whole network)."""

    def __init__(self, interp_shape: tuple[int, int]) -> None:
        torch.nn.Module.__init__(self)
        self.v2, self.support_grid_size, self.interp_shape, self.model = False, 6, interp_shape, _StandIn()


def _rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=93)
    ap.add_argument("--height", type=int, default=720)
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--interp", type=int, nargs=2, default=(384, 512), metavar=("H", "W"))
    args = ap.parse_args()
    frames = np.random.default_rng(0).integers(0, 256, (args.frames, args.height, args.width, 3), dtype=np.uint8)
    frames.flags.writeable = False
    tracker = CoTracker3Tracker(predictor=_Predictor(tuple(args.interp)))
    tracker.track(frames[:2], grid_size=2)  # torch's first-call allocations out of the figure
    before = _rss_mib()
    tracker.track(frames, grid_size=8)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"frames": list(frames.shape), "interp_shape": list(args.interp),
                      "frames_mib": round(frames.nbytes / 2**20, 1), "peak_rss_growth_mib": round(peak - before, 1)}))


if __name__ == "__main__":
    main()
