"""Evidence-tool performance ratios (CPU), printed as ``name: value``.

lk_track_over_decode          LK on 81 frames 256x256 with a 16x16 grid / decoding those frames (target <= 3);
                              `lk_track_ms` and `decode_ms` give both times. The decoder got ~2x faster in
                              place (commit 5484a20, one reused swscale context): measured in one session on
                              the 2-core VM, LK takes ~61 ms both before and after it, decoding 32-33 ms before
                              and 17-19 ms after, so the ratio went from ~1.9 to 3.2-3.9 without LK getting
                              slower. Opening the container without FFmpeg's probe decode (ba0b84b) took
                              decoding to 15-16 ms, and the ratio to ~3.9, LK unchanged at ~61 ms.
                              LK is at OpenCV's floor here (each of its 160 calls is ~0.75 ms of
                              per-point work on one core; the forward chain and the checks already fill both)
http_over_inprocess_track     the same tracking request over HTTP (frames uploaded, as the Toolbox does) /
                              in-process (target <= 1.3)
http_path_over_inprocess_track  by path (the service decodes) / in-process decode + track
concurrent32_p95_over_single  service latency p95 with 32 concurrent clients / one client's latency (2 workers)
surprise_batched_over_loop    all windows batched / one window at a time, small random V-JEPA 2 (target <= 0.7)

Run: ``.venv/bin/python benchmarks/tools.py`` (no network, no weights).
"""

from __future__ import annotations

import socket
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import cv2
import numpy as np

if TYPE_CHECKING:
    import uvicorn


def best_of(fn, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def paired(fa, fb, repeats: int = 7) -> tuple[float, float]:
    """Best times of two functions measured alternately (both see the same machine load)."""
    ta, tb = [], []
    for _ in range(repeats):
        ta.append(best_of(fa, 1))
        tb.append(best_of(fb, 1))
    return min(ta), min(tb)


def clip(t_total: int = 81, size: int = 256) -> np.ndarray:
    rng = np.random.default_rng(0)
    tex = cv2.GaussianBlur((rng.random((size, size + 2 * t_total)) * 255).astype(np.uint8), (0, 0), 2)
    return np.repeat(np.stack([tex[:, 2 * t:2 * t + size] for t in range(t_total)])[..., None], 3, -1)


def start_server(app) -> tuple[str, uvicorn.Server, threading.Thread]:
    import uvicorn

    from tools.service_http import SERVER_KEEPALIVE_S

    # proto=IPPROTO_TCP, as uvicorn.run(host, port) creates it: asyncio enables TCP_NODELAY only on sockets
    # whose proto says TCP, and a bare socket.socket() (proto 0) left Nagle + delayed ACK adding ~40 ms to
    # each upload answer here, a cost the real service (``raa serve-tools``) does not have.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    srv = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_keep_alive=SERVER_KEEPALIVE_S))  # as raa serve-*
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not srv.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{sock.getsockname()[1]}", srv, thread


def tiny_vjepa():
    import torch
    from transformers import VJEPA2Config, VJEPA2Model

    torch.manual_seed(0)
    cfg = VJEPA2Config(crop_size=64, patch_size=16, frames_per_clip=16, tubelet_size=2, hidden_size=96,
                       num_attention_heads=4, num_hidden_layers=2, pred_hidden_size=96,
                       pred_num_attention_heads=4, pred_num_hidden_layers=2, num_pooler_layers=1)
    return VJEPA2Model(cfg).eval()


def main() -> None:
    from tools.client import RemoteMotionTracker, ToolServiceClient
    from tools.motion import LKTracker
    from tools.service import create_app
    from tools.settings import ToolSettings
    from tools.surprise import VJEPA2SurpriseScorer, preprocess_frames, window_starts
    from tools.video import read_all_frames, write_video

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        frames = clip()
        path = write_video(root / "clip.mp4", frames)
        decoded = read_all_frames(path)
        tracker = LKTracker()
        t_track, t_decode = paired(lambda: tracker.track(decoded, grid_size=16), lambda: read_all_frames(path))
        print(f"lk_track_ms: {t_track * 1e3:.1f}")
        print(f"decode_ms: {t_decode * 1e3:.1f}")
        print(f"lk_track_over_decode: {t_track / t_decode:.3f}")

        app = create_app(ToolSettings(), root, workers=2, tracker=tracker, enable_surprise=False)
        url, srv, thread = start_server(app)
        with ToolServiceClient(url) as c:
            remote = RemoteMotionTracker(c)
            t_http, t_local = paired(lambda: remote.track(decoded, grid_size=16),
                                     lambda: tracker.track(decoded, grid_size=16))
            print(f"http_over_inprocess_track: {t_http / t_local:.3f}")
            t_http_path, t_local_path = paired(lambda: remote.track_path("clip.mp4", grid_size=16),
                                               lambda: tracker.track(read_all_frames(path), grid_size=16))
            print(f"http_path_over_inprocess_track: {t_http_path / t_local_path:.3f}")

            def one() -> float:
                t0 = time.perf_counter()
                remote.track_path("clip.mp4", grid_size=16)
                return time.perf_counter() - t0

            single = statistics.median([one() for _ in range(5)])
            with ThreadPoolExecutor(32) as pool:
                lat = sorted(pool.map(lambda _: one(), range(32)))
            p95 = lat[int(np.ceil(0.95 * len(lat))) - 1]
            print(f"concurrent32_p95_over_single: {p95 / single:.3f}")
        srv.should_exit = True
        thread.join(timeout=10)

    scorer = VJEPA2SurpriseScorer(model=tiny_vjepa())
    px = preprocess_frames(clip(49, 128), 64)
    starts = window_starts(len(px))
    t_batched, t_loop = paired(lambda: scorer.score_windows(px, starts, batch_size=len(starts)),
                               lambda: scorer.score_windows(px, starts, batch_size=1), 3)
    print(f"surprise_batched_over_loop: {t_batched / t_loop:.3f}")


if __name__ == "__main__":
    # this file is named tools.py: keep its folder from shadowing the ``tools`` package
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
    main()
