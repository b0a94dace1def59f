"""How a clip's path or bytes are opened with PyAV: by the reader (`tools.video_scan.open_container`) and by the second
demux that tells a demuxer's EIO from the disk's (`tools.video_errors.demux_fails_with_eio`), so that both read the
same demuxer. That second demux opened a tiny MPEG-TS clip without the format the reader names where FFmpeg's probe
cannot place it: its open failed (EOF) and a repeated EIO of the clip's data was called the machine's."""

from __future__ import annotations

import io
from pathlib import Path

import av

from tools.mpegts_tail import starts_as_mpegts


def av_open(src: str | Path | bytes | bytearray | memoryview,
            options: dict[str, str] | None = None) -> av.container.InputContainer:
    """``av.open`` of ``src`` for reading: a path as ``file:`` (else FFmpeg reads a name like 2024-01-01T12:30:00.mp4 as
    a URL scheme), bytes from memory; named MPEG-TS when FFmpeg's format probe fails on a file that starts with whole
    transport packets (a 2-frame clip of 1.5 KB failed with EOF while 1 and 3 frames opened: `starts_as_mpegts`)."""

    def target() -> str | io.BytesIO:
        return io.BytesIO(bytes(src)) if isinstance(src, bytes | bytearray | memoryview) else f"file:{Path(src)}"

    try:
        return av.open(target(), mode="r", options=options or {})
    except av.error.FFmpegError:
        fmt = starts_as_mpegts(src)
        if fmt is None:
            raise
    return av.open(target(), mode="r", format=fmt, options=options or {})
