"""The file size an FLV's ``onMetaData`` states, and whether the file is that long (a check of `tools.video_duration`).

FLV declares no frame count and its demuxer gives no frame a duration, so a cut file is found by the header's duration
running past the last frame (`tools.video_duration.check_duration`). That duration is the writer's end of the video,
its last frame's own duration included (FFmpeg's muxer: last pts + that duration): a complete clip whose last frame is
held longer than the frames before it (a variable-rate clip remuxed from MP4 / Matroska) was called truncated. FFmpeg's
muxer (and flvtool2, yamdi) also writes the file's size there once the file is complete; a file at least that long is
whole, and its duration needs no check. A size of 0 (a live writer), a missing one or a header that does not parse
(None) tells nothing: the duration check stands.
"""

from __future__ import annotations

import struct
from pathlib import Path

HEAD_BYTES = 1 << 20  # the onMetaData tag is the first one; FFmpeg's is ~300 bytes, a keyframe index adds 18 a keyframe
SCRIPT_TAG = 18
MAX_DEPTH = 8


class _Malformed(Exception):
    """Internal: the AMF0 data does not parse."""


def _skip(data: bytes, at: int, depth: int = 0) -> int:
    """The offset past the AMF0 value at ``at``."""
    if at >= len(data) or depth > MAX_DEPTH:
        raise _Malformed
    kind, at = data[at], at + 1
    fixed = {0: 8, 1: 1, 5: 0, 6: 0, 11: 10}.get(kind)  # number, boolean, null, undefined, date
    if fixed is not None:
        return at + fixed
    if kind == 2:  # string
        return at + 2 + int.from_bytes(data[at:at + 2], "big")
    if kind == 12:  # long string
        return at + 4 + int.from_bytes(data[at:at + 4], "big")
    if kind in (3, 8):  # object; ECMA array (a count, then the same pairs)
        return _pairs(data, at + (4 if kind == 8 else 0), depth)
    if kind == 10:  # strict array
        count, at = int.from_bytes(data[at:at + 4], "big"), at + 4
        for _ in range(count):
            at = _skip(data, at, depth + 1)
        return at
    raise _Malformed


def _pairs(data: bytes, at: int, depth: int, key: str | None = None) -> int:
    """The offset past the end marker of the pairs at ``at``; or, given ``key``, the offset of its value as soon as it
    comes (-1 when it never does)."""
    while True:
        if at + 3 > len(data):
            raise _Malformed
        size = int.from_bytes(data[at:at + 2], "big")
        if size == 0 and data[at + 2] == 9:
            return -1 if key is not None else at + 3
        if key is not None and data[at + 2:at + 2 + size] == key.encode():
            return at + 2 + size
        at = _skip(data, at + 2 + size, depth + 1)


def stated_size(head: bytes) -> int | None:
    """The ``filesize`` of the ``onMetaData`` in the first tag of an FLV's first bytes ``head``; None when there is
    none, it is 0 or not a number, or the header does not parse."""
    if len(head) < 9 or head[:3] != b"FLV":
        return None
    tag = int.from_bytes(head[5:9], "big") + 4  # the header, then the first PreviousTagSize
    if tag + 11 > len(head) or head[tag] & 0x1F != SCRIPT_TAG:
        return None
    body = head[tag + 11:tag + 11 + int.from_bytes(head[tag + 1:tag + 4], "big")]
    try:
        name_end = _skip(body, 0)
        if body[:1] != b"\x02" or body[3:name_end] != b"onMetaData" or body[name_end:name_end + 1] not in (b"\x03",
                                                                                                        b"\x08"):
            return None
        at = _pairs(body, name_end + (5 if body[name_end] == 8 else 1), 0, "filesize")
    except _Malformed:
        return None
    if at < 0 or body[at:at + 1] != b"\x00" or at + 9 > len(body):
        return None
    size = struct.unpack_from(">d", body, at + 1)[0]
    return int(size) if size >= 1 and size == int(size) else None


def whole_flv(src: str | Path | bytes | bytearray | memoryview) -> bool:
    """True when the FLV ``src`` is at least as long as the size its ``onMetaData`` states (module docstring)."""
    if isinstance(src, bytes | bytearray | memoryview):
        head, total = bytes(memoryview(src)[:HEAD_BYTES]), len(src)
    else:
        with open(src, "rb") as fh:
            head, total = fh.read(HEAD_BYTES), fh.seek(0, 2)
    size = stated_size(head)
    return size is not None and total >= size
