"""ISO base media (MP4 / MOV) box reading shared by `tools.video_rotation`, `tools.video_edits` and the
scan's truncation check (`tools.video_complete`).

Only what those need: the boxes at one level of a buffer, the top-level ``moov`` box of a file, read
without loading the media data, a fragmented file's media box that its end cuts (`cut_fragment`), and
a fragment index (``sidx``) that indexes bytes past the file's end (`index_past_end`), and the duration a
fragmented file's ``mehd`` box states (`fragmented_duration`).
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
        for name, payload in child_boxes(memoryview(src)):
            if name == b"moov":
                return payload
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


def _top_level(src: str | Path | bytes | bytearray | memoryview) -> tuple[list[tuple[bytes, int, int]], int]:
    """(type, offset, size) of each top-level box, from the box headers alone, and the file's length. A box
    whose size runs to the end of the file (0) is given that size; the walk stops at a malformed header."""
    if isinstance(src, bytes | bytearray | memoryview):
        data = memoryview(src)
        total = len(data)

        def read(offset: int, n: int) -> bytes:
            return bytes(data[offset:offset + n])
    else:
        fh = open(src, "rb")  # noqa: SIM115  (closed below; read() is called in the walk)
        total = fh.seek(0, 2)

        def read(offset: int, n: int) -> bytes:
            fh.seek(offset)
            return fh.read(n)
    boxes, pos = [], 0
    try:
        while pos + 8 <= total:
            size, kind = struct.unpack(">I4s", read(pos, 8))
            header = 8
            if size == 1:
                large = read(pos + 8, 8)
                if len(large) < 8:
                    break
                size, header = struct.unpack(">Q", large)[0], 16
            elif size == 0:
                size = total - pos
            if size < header:
                break
            boxes.append((bytes(kind), pos, size))
            pos += size
    finally:
        if not isinstance(src, bytes | bytearray | memoryview):
            fh.close()
    return boxes, total


def cut_fragment(src: str | Path | bytes | bytearray | memoryview) -> tuple[bytes, int, int, int] | None:
    """(type, offset, declared size, file length) of the ``moof`` or ``mdat`` box that the end of a fragmented
    file (one with a top-level ``moof``) cuts, of a box header it cuts, or of a last ``moof`` without its ``mdat``;
    None when there is none or the file is not fragmented.

    A fragmented MP4's ``moov`` declares no samples: the fragments do. Cut where one frame's data ends, inside
    an ``mdat``, FFmpeg reads the frames before the cut, none of them short, as a complete shorter clip; the
    box's size says the file ended early. A cut between two fragments leaves no trace (a shorter clip), but one a few
    bytes into the next box's 8-byte header does (it read as the shorter clip before): those bytes, where they can start
    such a header (`header_start`), are given as a box of type ``b""`` (their offset, 8, the file's length); except after
    a whole last ``mfra`` box, the fragment index a writer adds as it closes the file (FFmpeg does): no fragment follows
    it, so bytes after it are a copy's padding, not a cut header (a size field begun, ``00 00 01``, included)."""
    boxes, total = _top_level(src)
    if not any(kind == b"moof" for kind, _, _ in boxes):
        return None
    kind, offset, size = boxes[-1]
    end = offset + size
    # a few bytes that can start a header: the file ends inside one; not after the mfra that closes the file
    if 0 < total - end < 8 and kind != b"mfra" and header_start(_read_range(src, end, total - end)):
        return b"", end, 8, total
    # a fragment's moof is followed by its mdat: a file that ends after a complete moof lacks that fragment's data
    cut = kind == b"moof" or (kind == b"mdat" and offset + size > total)
    return (kind, offset, size, total) if cut else None


def header_start(head: bytes) -> bool:
    """Whether ``head`` (under 8 bytes) can be the start of the header of a box that follows a fragment (a ``moof``,
    ``styp``, ``sidx``, ``emsg``, ...): its size field under 16 MiB (a first byte of 0) and, where whole, of at least
    8 bytes (or 1, a 64-bit size), its type's bytes printable. Other bytes after the last box (a newline, text, 1 to 7
    zero bytes) are no cut header but bytes a writer or a copy left after a complete clip, which FFmpeg ignores (8 or
    more such bytes always read as one more box, of no fragment). 1 to 3 zero bytes cannot be told from a size field
    cut short: they read as padding (they were a cut header, which made a complete clip without a closing ``mfra``
    "truncated"), and a file cut there has lost only whole fragments, as one cut between two fragments has (no trace
    but a ``sidx`` or ``mehd`` box's: `index_past_end`, `fragmented_duration`)."""
    if not head or head[0] != 0 or not any(head):
        return False
    if len(head) >= 4 and struct.unpack_from(">I", head)[0] not in range(8, 2**24) and head[:4] != b"\0\0\0\x01":
        return False
    return all(0x20 <= b < 0x7F for b in head[4:])


MAX_SIDX_BYTES = 16 * 2**20  # a larger index is not read (12 bytes a fragment: over a million fragments)


def _read_range(src: str | Path | bytes | bytearray | memoryview, offset: int, n: int) -> bytes:
    if isinstance(src, bytes | bytearray | memoryview):
        return bytes(memoryview(src)[offset:offset + n])
    with open(src, "rb") as fh:
        fh.seek(offset)
        return fh.read(n)


def sidx_end(box: bytes) -> int | None:
    """Bytes from the end of a whole ``sidx`` box (header included) to the end of what it indexes: its
    first_offset plus the sizes of its references; None when the box does not parse."""
    head = 16 if len(box) >= 8 and struct.unpack_from(">I", box)[0] == 1 else 8
    body = memoryview(box)[head:]
    if len(body) < 4:
        return None
    refs_at, fmt = (24, ">4xIIIIHH") if body[0] == 0 else (32, ">4xIIQQHH")
    if len(body) < refs_at:
        return None
    _, _, _, first_offset, _, count = struct.unpack_from(fmt, body)
    if len(body) < refs_at + 12 * count:
        return None
    sizes = struct.unpack_from(">" + "I8x" * count, body, refs_at)
    return first_offset + sum(size & 0x7FFFFFFF for size in sizes)  # the top bit: the reference's type


def index_past_end(src: str | Path | bytes | bytearray | memoryview) -> tuple[int, int, int] | None:
    """(offset, end of the indexed bytes, file length) of the first top-level ``sidx`` box of a fragmented
    file whose fragments run past the file's end; None when there is none.

    A file cut between two fragments leaves no box cut short (`cut_fragment`), but an index written for
    the whole file (FFmpeg's ``global_sidx``, DASH and CMAF packagers) still gives every fragment's bytes:
    FFmpeg then read the fragments there as the clip, with the index's longer duration."""
    boxes, total = _top_level(src)
    if not any(kind == b"moof" for kind, _, _ in boxes):
        return None
    for kind, offset, size in boxes:
        if kind != b"sidx" or offset + size > total or size > MAX_SIDX_BYTES:
            continue
        indexed = sidx_end(_read_range(src, offset, size))
        if indexed is not None and offset + size + indexed > total:
            return offset, offset + size + indexed, total
    return None


def fragmented_duration(src: str | Path | bytes | bytearray | memoryview) -> float | None:
    """Seconds the ``moov/mvex/mehd`` box of a fragmented file says its fragments last (the longest track's);
    None when the file is not fragmented, has no such box, or it does not parse.

    FFmpeg ignores the box (its duration is the fragments' it read), so a file cut between two fragments
    left no trace through it; GPAC, Bento4 and Shaka write it for files packaged whole."""
    if not any(kind == b"moof" for kind, _, _ in _top_level(src)[0]):
        return None
    moov = read_moov(src)
    if moov is None:
        return None
    boxes = dict(child_boxes(moov))
    mvhd, mvex = boxes.get(b"mvhd"), boxes.get(b"mvex")
    mehd = dict(child_boxes(mvex)).get(b"mehd") if mvex is not None else None
    if mvhd is None or mehd is None or len(mvhd) < 24 or len(mehd) < 8:
        return None
    scale = struct.unpack_from(">I", mvhd, 20 if mvhd[0] == 1 else 12)[0]
    if mehd[0] == 1:
        duration = struct.unpack_from(">Q", mehd, 4)[0] if len(mehd) >= 12 else 0
    else:
        duration = struct.unpack_from(">I", mehd, 4)[0]
    return duration / scale if scale and duration else None
