"""Shared pieces of the tool-service tests: token, a tiny random V-JEPA 2 scorer, a tracker that holds its runs
(`HeldTracker`), a moving test clip, .npy bodies and `serve` (the app on a real uvicorn socket). Their fixtures (`service_root`, `service_scorer`) are in
conftest.py."""

from __future__ import annotations

import contextlib
import io
import socket
import threading
import time

import numpy as np

from tests.vjepa_files import tiny_vjepa2
from tools.motion import LKTracker
from tools.surprise import VJEPA2SurpriseScorer

TOKEN = "s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
NPY = {**AUTH, "Content-Type": "application/x-npy"}
"""Headers of an authorised request whose body is an .npy frame array."""


def npy(arr: np.ndarray) -> bytes:
    """`arr` as an .npy request body."""
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def tiny_scorer() -> VJEPA2SurpriseScorer:
    return VJEPA2SurpriseScorer(model=tiny_vjepa2(layers=1, drawn_mask_tokens=False), batch_size=4)


class HeldTracker:
    """A motion tracker that counts its runs and holds each (until `release` is set, 10 s at most) before
    tracking with LK: a request that keeps the tool service busy (pending and body limits, timeouts)."""

    def __init__(self) -> None:
        self.calls, self.entered, self.release = 0, threading.Event(), threading.Event()

    def track(self, frames, *, grid_size=None, queries=None):
        self.calls += 1
        self.entered.set()
        self.release.wait(10)
        return LKTracker().track(frames, grid_size=grid_size, queries=queries)


def moving_clip(t_total: int = 12, h: int = 64, w: int = 64) -> np.ndarray:
    import cv2

    rng = np.random.default_rng(1)
    tex = cv2.GaussianBlur((rng.random((h, w + 64)) * 255).astype(np.uint8), (0, 0), 1.5)
    return np.repeat(np.stack([tex[:, 2 * t:2 * t + w] for t in range(t_total)])[..., None], 3, -1)


@contextlib.contextmanager
def serve(app):
    import uvicorn

    from tools.service_http import SERVER_KEEPALIVE_S

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY in asyncio
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_keep_alive=SERVER_KEEPALIVE_S))  # as raa serve-*
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(200):
        if srv.started:
            break
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        thread.join(timeout=10)
        sock.close()
