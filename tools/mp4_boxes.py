"""ISO base media (MP4 / MOV) box reading shared by `tools.video_rotation` and `tools.video_edits`.

Only what those two need: the boxes at one level of a buffer, and the top-level ``moov`` box of a file,
read without loading the media data.
"""

from __future__ import annotations

import struct
from pathlib import Path

MAX_MOOV_BYTES = 256 * 2**20  # a moov box larger than this is not read (hours of video in one file)


def child_boxes(data: memoryview) -> list[tuple[bytes, memoryview]]:
    """(type, payload) of the boxes in ``data``; stops at the first malformed header."""
    out, pos = [], 0
    while pos + 8 <= len(data):
        size, kind = struct.unpack_from(">I4s", data, pos)
        head = 8
        if size == 1:
            if pos + 16 > len(data):
                break
            size, head = struct.unpack_from(">Q", data, pos + 8)[0], 16
        elif size == 0:
            size = len(data) - pos
        if size < head or pos + size > len(data):
            break
        out.append((bytes(kind), data[pos + head:pos + size]))
        pos += size
    return out


def read_moov(src: str | Path | bytes | bytearray | memoryview) -> memoryview | None:
    """The payload of the top-level ``moov`` box of a file or buffer; None when there is none, it is cut, or it
    is larger than `MAX_MOOV_BYTES`. Only that box is read into memory."""
    if isinstance(src, bytes | bytearray | memoryview):
        for kind, body in child_boxes(memoryview(src)):
            if kind == b"moov":
                return body
        return None
    with open(src, "rb") as fh:
        while True:
            head = fh.read(8)
            if len(head) < 8:
                return None
            size, kind = struct.unpack(">I4s", head)
            header = 8
            if size == 1:
                large = fh.read(8)
                if len(large) < 8:
                    return None
                size, header = struct.unpack(">Q", large)[0], 16
            if kind == b"moov":
                if size == 0:
                    body = fh.read(MAX_MOOV_BYTES + 1)
                elif size - header > MAX_MOOV_BYTES:
                    return None
                else:
                    body = fh.read(size - header)
                return memoryview(body) if len(body) <= MAX_MOOV_BYTES else None
            if size == 0 or size < header:
                return None
            fh.seek(size - header, 1)
