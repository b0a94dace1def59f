"""Whether an MPEG-1 / MPEG-2 video packet holds a B picture (the timestamp check of `tools.video_scan`), and whether
its GOP is closed (the scan's lead).

FFmpeg's MPEG-1 / MPEG-2 decoder holds one frame back (``reorder_depth`` 1) unless the sequence header says low
delay, which few encoders set, whether or not the stream has B pictures. The scan takes timestamps that never reorder
in a codec that does for an AVI's decode-order timestamps and counts the decoder's output instead: for MPEG-1 / MPEG-2
without B pictures (decode order is presentation order there) that lost every frame time and all seeking, and a
2-frame MPEG-TS clip got FFmpeg's guessed rate (16 fps read as 32). The packets' picture headers say whether the
stream reorders at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing_extensions import Buffer  # collections.abc.Buffer from Python 3.12

MPEG_VIDEO = frozenset({"mpeg1video", "mpeg2video"})
"""FFmpeg's decoders of MPEG-1 / MPEG-2 video."""

PICTURE_START = b"\x00\x00\x01\x00"
GOP_START = b"\x00\x00\x01\xb8"
B_PICTURE = 3
"""``picture_coding_type`` of a B picture (1: I, 2: P, 4: D)."""

HEAD_BYTES = 4096
"""Bytes of a packet searched for its picture header (after a sequence header with both quantiser matrices, its
extensions and a GOP header: a few hundred bytes)."""


def picture_type(packet: Buffer) -> int | None:
    """The ``picture_coding_type`` of the first picture header in the packet's first `HEAD_BYTES` bytes (a PyAV
    Packet, or its bytes); None when there is none."""
    head = bytes(memoryview(packet)[:HEAD_BYTES])
    at = head.find(PICTURE_START)
    if at < 0 or at + 6 > len(head):
        return None
    return (head[at + 5] >> 3) & 7  # after the 10-bit temporal_reference


def without_b_pictures(types: list[int | None]) -> bool:
    """Whether packets of these picture types (`picture_type`) show a stream without B pictures: every one found, none
    a B picture."""
    return bool(types) and all(t is not None and t != B_PICTURE for t in types)


def closed_gop(packet: Buffer) -> bool:
    """Whether the packet's first `HEAD_BYTES` bytes hold a GOP header with ``closed_gop`` set: the B pictures after
    its I picture in decode order (shown before it) then predict from it alone, and FFmpeg's decoder, given no earlier
    picture, decodes them (it drops them after an open GOP's header, or without a GOP header)."""
    head = bytes(memoryview(packet)[:HEAD_BYTES])
    at = head.find(GOP_START)
    return 0 <= at and at + 8 <= len(head) and bool(head[at + 7] & 0x40)  # after the 25-bit time code
