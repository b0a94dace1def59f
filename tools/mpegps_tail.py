"""Whether an MPEG program stream (``.mpg``, ``.vob``) ends inside a pack or a PES packet (the truncation check of
`tools.video_complete`).

MPEG-PS declares neither a frame count nor a duration, and FFmpeg flags no packet of a file cut short: the video
parser hands on the last picture with the data that is there, and it decodes as a damaged picture (or another
frame's), which the reward agent then judged as the clip's own. The stream is a chain of elements that each state
their size: a pack header (12 bytes in MPEG-1, 14 plus its stuffing in MPEG-2), a system header or PES packet (6
bytes plus its 16-bit length), the 4-byte program end code. The chain is walked from the first pack header in the
file's last `TAIL_BYTES`; a file whose last element runs past its end was cut inside it. A padding packet (stream
0xBE) cut short loses no frame data: no cut. A file that ends right after a pack header (and its system header) was
cut there too: a pack announces packets, and no muxer ends a file on an empty one. Bytes after the last whole
element that start no element (zero or 0xFF stuffing; fewer than the 4 bytes of a start code) are no cut either, and
a tail whose chain breaks (a start code that payload bytes happened to hold) gives no verdict. A cut on an element's
boundary leaves no trace: the clip reads as a shorter one, as with MPEG-TS (`tools.mpegts_tail`).
"""

from __future__ import annotations

from pathlib import Path

from tools.mpegts_tail import file_tail

PACK, END, SYSTEM, PADDING = 0xBA, 0xB9, 0xBB, 0xBE
PREFIX = b"\x00\x00\x01"
TAIL_BYTES = 3 * 65542
"""Bytes of the file's end searched: three of the largest PES packets (6 + 65535 bytes), so that a pack header lies
in them when the file has packs at all."""


def _walk(tail: bytes, at: int) -> bool | None:
    """From the pack header at ``at``: True when the chain of elements ends past the end of ``tail``, or with a pack
    header without packets (a cut); False when it ends with it (or with stuffing, or a cut padding packet); None when
    it breaks (not a real pack header)."""
    end, packets = len(tail), True  # packets: whether a packet followed the last pack header
    while at < end:
        if tail[at:at + 3] != PREFIX:
            rest = tail[at:]
            stuffing = rest.count(rest[:1]) == len(rest) and rest[:1] in (b"\x00", b"\xff")
            return None if not stuffing else not packets
        if end - at < 4:
            return not packets  # 00 00 01 alone: as likely stuffing as a start code begun
        code = tail[at + 3]
        if code == PACK:
            if end - at < 5:
                return True
            if tail[at + 4] >> 6 == 1:  # MPEG-2: 14 bytes, then 0-7 stuffing bytes
                if end - at < 14:
                    return True
                size = 14 + (tail[at + 13] & 7)
            elif tail[at + 4] >> 4 == 2:  # MPEG-1
                size = 12
            else:
                return None
            packets = False
        elif code == END:
            size, packets = 4, True
        elif code >= SYSTEM:
            if end - at < 6:
                return True
            size = 6 + (tail[at + 4] << 8 | tail[at + 5])
            if size == 6:
                return None  # an unbounded PES packet (MPEG-TS only): no program stream element
            if at + size > end:
                return code != PADDING
            packets = packets or code != SYSTEM
        else:
            return None  # a video start code where an element should begin
        if at + size > end:
            return True
        at += size
    return not packets  # a pack header (and system header) without its packets: no muxer ends a file so


def ends_inside_element(src: str | Path | bytes | bytearray | memoryview) -> bool:
    """Whether the program stream ``src`` ends inside a pack header, system header or PES packet (not a padding one):
    the file was cut (module docstring). False where no pack header in its tail starts a chain that walks to its end."""
    tail = file_tail(src, TAIL_BYTES)
    at = tail.find(PREFIX + bytes([PACK]))
    while at >= 0:
        verdict = _walk(tail, at)
        if verdict is not None:
            return verdict
        at = tail.find(PREFIX + bytes([PACK]), at + 1)
    return False
