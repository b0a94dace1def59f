"""Video I/O with PyAV (placeholder header; the video module is being completed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_video(path: str | Path, frames: np.ndarray, fps: float = 16.0, *, codec: str = "libx264",
                crf: int = 18) -> Path:
    """Encode RGB uint8 frames [T,H,W,3] to an mp4 (H.264, yuv420p; odd sizes are padded by one pixel)."""
    import av

    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise ValueError(f"write_video expects uint8 frames [T,H,W,3], got {frames.dtype} {frames.shape}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    t, h, w, _ = frames.shape
    ph, pw = h + (h % 2), w + (w % 2)
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream(codec, rate=int(round(fps)))
        stream.width, stream.height, stream.pix_fmt = pw, ph, "yuv420p"
        stream.options = {"crf": str(crf)}
        for frame in frames:
            if (ph, pw) != (h, w):
                frame = np.pad(frame, ((0, ph - h), (0, pw - w), (0, 0)), mode="edge")
            for packet in stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path
