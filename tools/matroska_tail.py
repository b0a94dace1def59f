"""Whether a Matroska / WebM file ends before its Segment does (a truncation check of `tools.video_scan`).

A seekable Matroska muxer (FFmpeg, mkvmerge) writes the Segment element's size in its header once the file is
complete; a file cut short keeps that header, so the Segment runs past the file's end. The header's duration
check (`tools.video_scan`) misses cuts that lose only a few frames, or B-frames from the middle of the
presentation order (a file is cut in decode order): those files read as shorter clips. A Segment of unknown
size (all ones: live writers such as a browser's MediaRecorder) tells nothing, nor does a header that does not
parse: both give None.
"""

from __future__ import annotations

from pathlib import Path

EBML_ID = 0x1A45DFA3
SEGMENT_ID = 0x18538067
HEAD_BYTES = 64  # the EBML header FFmpeg and mkvmerge write is ~40 bytes; one with a long DocType fails to parse


def _vint(data: bytes, at: int) -> tuple[int, int, bool] | None:
    """(value with the length marker removed, length, all value bits set) of the EBML variable-size integer at
    ``at``, or None when it does not fit or is malformed."""
    if at >= len(data) or data[at] == 0:
        return None
    length = 8 - data[at].bit_length() + 1
    if at + length > len(data):
        return None
    value = int.from_bytes(data[at:at + length], "big") & ((1 << (7 * length)) - 1)
    return value, length, value == (1 << (7 * length)) - 1


def _element_id(data: bytes, at: int) -> tuple[int, int] | None:
    """(id with its marker, length) of the element ID at ``at``."""
    if at >= len(data) or data[at] == 0:
        return None
    length = 8 - data[at].bit_length() + 1
    return (int.from_bytes(data[at:at + length], "big"), length) if at + length <= len(data) else None


def segment_shortfall(src: str | Path | bytes | bytearray | memoryview) -> tuple[int, int] | None:
    """(the Segment's end offset, the file's length) when the file ends before its Segment's declared end; None
    when it does not, or the size is unknown, or the header does not parse."""
    if isinstance(src, bytes | bytearray | memoryview):
        head, total = bytes(memoryview(src)[:HEAD_BYTES]), len(src)
    else:
        with open(src, "rb") as fh:
            head, total = fh.read(HEAD_BYTES), fh.seek(0, 2)
    pos = 0
    for expected in (EBML_ID, SEGMENT_ID):
        ident = _element_id(head, pos)
        if ident is None or ident[0] != expected:
            return None
        size = _vint(head, pos + ident[1])
        if size is None:
            return None
        value, length, unknown = size
        body = pos + ident[1] + length
        if expected == SEGMENT_ID:
            end = body + value
            return (end, total) if not unknown and end > total else None
        pos = body + value
    return None
