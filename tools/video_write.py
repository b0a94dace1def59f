"""Encode frames to a video file with PyAV (used by the clip suite, tests and benchmarks).

The clip is encoded to a hidden file beside ``path`` and moved there once complete: an error or interrupt
mid-encode leaves no half-written clip (nor replaces an earlier one). As open() would, it writes through a symlink at
``path`` (the move replaced the link with the clip, leaving its target as it was) and keeps the permission bits of a
file it replaces (the clip had the umask's). Frame sizes are padded with edge pixels to the multiple the pixel format's chroma subsampling needs
(even widths for 4:2:0 / 4:2:2 at any bit depth or layout, even heights for 4:2:0, 4 for 4:1:1);
gray output is stored full-range so gray values survive a round trip. ``tools.video`` re-exports
``write_video``.
"""

from __future__ import annotations

import os
import stat
import uuid
from fractions import Fraction
from pathlib import Path
from typing import cast

import av
import numpy as np

from tools.video_rate import fps_problem, stored_rate


def chroma_steps(pix_fmt: str) -> tuple[int, int]:
    """(height, width) a frame's size must be a multiple of in ``pix_fmt``: its chroma subsampling, from
    FFmpeg's format description (a fixed list of names missed yuv420p10le, nv16, p010le and the like,
    and libx264 then failed in avcodec_open2 on odd sizes)."""
    fmt = av.VideoFormat(pix_fmt)
    size = 1 << 10
    return size // fmt.chroma_height(size), size // fmt.chroma_width(size)


def write_video(path: str | Path, frames: np.ndarray, fps: float = 16.0, *, codec: str = "libx264",
                crf: int = 18, pix_fmt: str = "yuv420p", gop: int | None = None,
                preset: str | None = None) -> Path:
    """Encode uint8 frames ``[T,H,W,3]`` RGB (or ``[T,H,W]`` gray) to a video file.

    ``pix_fmt`` is the encoded format ("yuv420p" default; "gray" or "yuv444p" keep odd sizes and
    gray content exact); chroma-subsampled formats pad odd sizes with edge pixels. ``gop`` is the
    keyframe interval; None keeps the codec's (libx264: 250, so a rollout shorter than that has one keyframe and a
    read of any frame decodes from frame 0). A read of a few frames skips to keyframes only, and whether more of them
    pay depends on the content (480x832, 81 frames, 5 frames read, CPU time, 2-core VM): where everything moves,
    ``gop=16`` halved the read (113 -> 60 ms; ``gop=32``: no gain) for an 8% larger file; over a static background
    (the benchmarks' clips) a keyframe costs far more than the frames between, and ``gop=16`` gave a file 4.4x larger
    and a read 1.9x slower. Tools that decode every frame (the surprise scorer) gain nothing. Hence the codec's
    default. ``crf`` and ``preset`` apply to libx264/libx265.
    ``ValueError`` for no frames, frames of 0 pixels, an ``fps`` that cannot be stored
    (`tools.video_rate.fps_problem`: not above 1/2002 or not below 2**31), or a ``codec`` that is no video
    encoder or does not take ``pix_fmt``.
    """
    frames = np.asarray(frames)
    gray = frames.ndim == 3
    if frames.dtype != np.uint8 or not (gray or (frames.ndim == 4 and frames.shape[-1] == 3)):
        raise ValueError(f"write_video expects uint8 frames [T,H,W,3] or [T,H,W], got {frames.dtype} "
                         f"{frames.shape}")
    if 0 in frames.shape[:3]:  # PyAV writes no file without a packet; a 0-pixel frame fails inside PyAV
        raise ValueError(f"write_video needs at least one frame of at least 1x1 pixels, got {frames.shape}")
    rate = stored_rate(fps)  # the nearest fraction with a denominator up to 1001: not 0, not past 32 bits
    if rate is None:
        raise ValueError(fps_problem(fps))
    path = Path(path)
    dest = Path(os.path.realpath(path)) if path.is_symlink() else path  # written through a link, as open() does
    dest.parent.mkdir(parents=True, exist_ok=True)
    h, w = frames.shape[1:3]
    encoder = av.codec.Codec(codec, "w")
    if encoder.type != "video":  # else PyAV opened an audio or subtitle stream, which failed on the frame's size
        raise ValueError(f"{codec} is not a video encoder (it encodes {encoder.type})")
    formats = encoder.video_formats
    if formats and pix_fmt not in {f.name for f in formats}:  # else an opaque avcodec_open2 error (EINVAL)
        raise ValueError(f"{codec} does not encode {pix_fmt}; it takes {', '.join(f.name for f in formats)}")
    step_h, step_w = chroma_steps(pix_fmt)
    ph, pw = -(-h // step_h) * step_h, -(-w // step_w) * step_w
    partial = partial_path(dest)
    try:
        _encode(partial, frames, rate, codec, crf, pix_fmt, gop, preset, (ph, pw))
        keep_mode(dest, partial)
        os.replace(partial, dest)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return path


def keep_mode(dest: Path, partial: Path) -> None:
    """Give ``partial`` the permission bits of the file at ``dest`` it replaces, as writing into that file would keep
    them (a new file has the umask's, as open() gives)."""
    try:
        mode = stat.S_IMODE(dest.stat().st_mode)
    except FileNotFoundError:
        return
    os.chmod(partial, mode)


def partial_path(path: Path) -> Path:
    """A unique hidden name beside ``path`` that keeps its extension (the muxer is chosen by it). The stem is cut to
    its first 48 bytes (UTF-8, whole characters): a name at the file system's limit (255 bytes) fit, its temporary
    one did not (ENAMETOOLONG)."""
    stem = path.stem.encode()[:48].decode(errors="ignore")
    return path.with_name(f".{stem}.{os.getpid()}-{uuid.uuid4().hex[:8]}.partial{path.suffix}")


def _encode(path: Path, frames: np.ndarray, rate: Fraction, codec: str, crf: int, pix_fmt: str, gop: int | None,
            preset: str | None, padded: tuple[int, int]) -> None:
    gray, (h, w), (ph, pw) = frames.ndim == 3, frames.shape[1:3], padded
    with av.open(f"file:{path}", mode="w") as container:  # "file:": a name like a:b.mp4 is no URL scheme
        stream = cast(av.VideoStream, container.add_stream(codec, rate=rate))  # write_video checked: a video codec
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
