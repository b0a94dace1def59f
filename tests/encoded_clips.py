"""Writing test clips: RGB frames encoded into a container with one of FFmpeg's encoders (the loop the video tests
share)."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np


def write_rgb_clip(path: Path, frames: np.ndarray, codec: str, *, rate: int, options: dict[str, str],
                   pix_fmt: str = "yuv420p", gop: int | None = None) -> Path:
    """Encode uint8 RGB ``frames`` [T, H, W, 3] with ``codec`` (``options``: the encoder's; ``gop``: the codec
    context's GOP size, where set) into ``path``, every packet muxed and the encoder flushed."""
    with av.open(str(path), "w") as c:
        s = c.add_stream(codec, rate=rate)
        s.width, s.height, s.pix_fmt = frames.shape[2], frames.shape[1], pix_fmt
        if gop is not None:
            s.codec_context.gop_size = gop
        s.options = options
        for f in frames:
            for p in s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path
