"""Encode frames to a video file with PyAV (used by the clip suite, tests and benchmarks).

Odd sizes are padded by one edge pixel for chroma-subsampled formats (4:2:0 / 4:2:2), which need
even sizes; gray output is stored full-range so gray values survive a round trip. ``tools.video``
re-exports ``write_video``.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np

_CHROMA_SUBSAMPLED = {"yuv420p", "yuvj420p", "yuv422p", "yuvj422p", "nv12", "nv21"}


def write_video(path: str | Path, frames: np.ndarray, fps: float = 16.0, *, codec: str = "libx264",
                crf: int = 18, pix_fmt: str = "yuv420p", gop: int | None = None,
                preset: str | None = None) -> Path:
    """Encode uint8 frames ``[T,H,W,3]`` RGB (or ``[T,H,W]`` gray) to a video file.

    ``pix_fmt`` is the encoded format ("yuv420p" default; "gray" or "yuv444p" keep odd sizes and
    gray content exact); 4:2:0 / 4:2:2 formats pad odd sizes by one edge pixel. ``gop`` is the
    keyframe interval (codec default when None); ``crf`` and ``preset`` apply to libx264/libx265.
    """
    frames = np.asarray(frames)
    gray = frames.ndim == 3
    if frames.dtype != np.uint8 or not (gray or (frames.ndim == 4 and frames.shape[-1] == 3)):
        raise ValueError(f"write_video expects uint8 frames [T,H,W,3] or [T,H,W], got {frames.dtype} "
                         f"{frames.shape}")
    if not fps > 0:
        raise ValueError(f"fps must be positive, got {fps}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    h, w = frames.shape[1:3]
    pad = pix_fmt in _CHROMA_SUBSAMPLED
    ph, pw = (h + h % 2, w + w % 2) if pad else (h, w)
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream(codec, rate=Fraction(fps).limit_denominator(1001))
        stream.width, stream.height, stream.pix_fmt = pw, ph, pix_fmt
        if pix_fmt.startswith("gray"):
            stream.codec_context.color_range = 2  # full range: gray samples are stored unscaled
        if gop is not None:
            stream.codec_context.gop_size = int(gop)
        if codec in ("libx264", "libx265"):
            stream.options = {"crf": str(crf), **({"preset": preset} if preset else {})}
        for frame in frames:
            if (ph, pw) != (h, w):
                widths = ((0, ph - h), (0, pw - w)) + (() if gray else ((0, 0),))
                frame = np.pad(frame, widths, mode="edge")
            image = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="gray" if gray else "rgb24")
            for packet in stream.encode(image):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path
