"""Whether an MPEG-TS file ends inside a transport packet (the truncation check of `tools.video_complete`).

MPEG-TS declares neither a frame count nor a duration, and FFmpeg flags no packet of a file cut short: the
last video frame's PES simply ends early (its length field is 0, "unbounded", for video), and its frame
decodes from part of its data as a damaged picture. A muxer writes whole transport packets, though, each
starting with the sync byte 0x47: 188 bytes, 192 in M2TS (a 4-byte timestamp first), 204 with 16 FEC bytes.
A file whose last two packets do not line up with its end, in any of those sizes, and whose bytes after them begin a
packet (its sync byte; in M2TS, before it, a timestamp that continues the packets' clock), was cut inside one. (A cut
on a packet boundary leaves no trace: the clip reads as a shorter one. Bytes after the last packet that begin none, a
newline or padding, are no cut: they made a complete clip "truncated".) The packets at the end are read in the size
the file's first three packets show (`head_packets`): in any size, 1 to 4 bytes after a 188-byte stream read as an
M2TS timestamp begun wherever one payload byte happened to be 0x47 (1 in 256 such clips). The reader's check counts
only a cut packet of the video's PID (or one cut before its PID shows), or one of another PID cut while the video's
PES runs on: part of an audio, PAT or null packet after a whole video PES holds none of the video (a complete clip
refused as "truncated" before), but a muxer may put such a packet between two of a video PES's (FFmpeg's PAT / PMT with a
mux rate, a broadcast's audio), and a cut there cuts the video's last frame (`_video_pes_ended`).
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SYNC = 0x47
PACKETS = ((188, 0), (192, 4), (204, 0))
"""(packet size, offset of its sync byte) of plain TS, M2TS and TS with FEC bytes."""


def file_tail(src: str | Path | bytes | bytearray | memoryview, n: int) -> bytes:
    """The last ``n`` bytes of ``src`` (all of it when shorter)."""
    if isinstance(src, bytes | bytearray | memoryview):
        return bytes(memoryview(src)[-n:])
    with open(src, "rb") as fh:
        size = fh.seek(0, 2)
        fh.seek(max(0, size - n))
        return fh.read(n)


def ends_inside_packet(src: str | Path | bytes | bytearray | memoryview, pid: int | None = None) -> bool:
    """Whether the file ends inside a transport packet of a size in `PACKETS`: it does not end on a whole packet, and
    its last whole packets are followed by a packet begun (its sync byte there, or, in M2TS, the start of the 4-byte
    timestamp before it, `_begins_packet`). Other bytes after the last whole packet (a newline, zero padding) are no
    cut packet: a complete clip, which FFmpeg reads whole. Only the sizes `head_packets` finds are tried (every one
    where it finds none: a file that starts mid-packet). False for a file shorter than two packets: nothing to tell.
    With ``pid`` (the video's), only a packet cut on that PID counts, or one cut before its PID shows (`_cut_pid`), or
    one of another PID (audio, a PAT, a null packet) after a video packet that does not visibly end its PES
    (`_video_pes_ended`): the cut then lands inside the video's last PES. After one that ends it, the cut packet holds
    none of the video's data."""
    tail = file_tail(src, 3 * max(size for size, _ in PACKETS))
    if len(tail) < 2 * PACKETS[0][0]:
        return False
    sizes = head_packets(src) or PACKETS
    if any(_packets_end(tail, size, sync, 0) for size, sync in sizes):
        return False
    return any(_packets_end(tail, size, sync, rest) and _begins_packet(tail, size, sync, rest)
               and (pid is None or _cut_pid(tail, sync, rest) in (None, pid)
                    or not _video_pes_ended(src, size, sync, rest, pid))
               for size, sync in sizes for rest in range(1, size))


def _video_pes_ended(src: str | Path | bytes | bytearray | memoryview, size: int, sync: int, rest: int,
                     pid: int) -> bool:
    """Whether the last packet of ``pid`` with a payload before the file's last ``rest`` bytes (whole packets of
    ``size``, sync byte at ``sync``) ends its PES visibly: its adaptation field holds stuffing. A muxer stuffs only a
    PES's last packet, whose data does not fill it (ISO 13818-1 2.4.3.5); a full one may end its PES or not (the PES
    length of a video PES is 0, unbounded): not ended, the cut counted as the video's (as before the PID was asked).
    False where no packet of ``pid`` is found."""
    with open_bytes(src) as data:
        for at in range(len(data) - rest - size + sync, -1, -size):
            head = data[at:at + 188]
            if len(head) < 188 or head[0] != SYNC or (head[1] & 0x1F) << 8 | head[2] != pid or not head[3] & 0x10:
                continue
            return head[3] & 0x30 == 0x30 and _stuffed(head)
    return False


def _stuffed(packet: bytes) -> bool:
    """Whether the adaptation field of ``packet`` (one with a payload after it) is longer than its flagged fields:
    stuffing bytes (a length of 0 is one stuffing byte)."""
    length = packet[4]
    if length == 0:
        return True
    flags, used = packet[5], 1
    used += 6 * bool(flags & 0x10) + 6 * bool(flags & 0x08) + bool(flags & 0x04)  # PCR, OPCR, splice countdown
    for flag in (0x02, 0x01):  # private data, then the extension: each with a length byte
        if flags & flag:
            used += 1 + (packet[5 + used] if 5 + used < 188 else 0)
    return length > used


def _cut_pid(tail: bytes, sync: int, rest: int) -> int | None:
    """The PID of the packet the last ``rest`` bytes of ``tail`` begin (sync byte at ``sync``); None where they end
    before it (its sync byte and the 13 bits after it)."""
    if rest < sync + 3:
        return None
    return (tail[-rest + sync + 1] & 0x1F) << 8 | tail[-rest + sync + 2]


@contextmanager
def open_bytes(src: str | Path | bytes | bytearray | memoryview) -> Iterator[bytes | mmap.mmap]:
    """The bytes of ``src``: a file is mapped, not read whole into memory (a long recording's TS may be gigabytes)."""
    if isinstance(src, bytes | bytearray | memoryview):
        yield bytes(src)
        return
    with open(src, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        yield data


def _begins_packet(tail: bytes, size: int, sync: int, rest: int) -> bool:
    """Whether the last ``rest`` bytes of ``tail``, after whole packets, begin one: its sync byte, where they reach it;
    before it (M2TS's 4-byte timestamp), the start of the timestamp that continues the last packets' (`_next_stamp`).
    Any 1 to 4 bytes read as a timestamp begun, and a complete M2TS clip with a newline or zero padding after it was
    "truncated"."""
    if rest > sync:
        return tail[-rest + sync] == SYNC
    return _next_stamp(tail, size, rest)


ATS = 2**30
"""M2TS's arrival timestamps count modulo 2^30 (the header's top 2 bits: copy permission)."""
FORWARD_STEPS = 8
"""How many of its largest recent steps a forward-running arrival clock may take to the next packet."""
SMALL_STEP = 2**24
"""Steps under this (0.6 s of the 27 MHz clock) are a clock running forward; larger ones FFmpeg's constant step."""


def _next_stamp(tail: bytes, size: int, rest: int) -> bool:
    """Whether the last ``rest`` (1 to 4) bytes of ``tail`` can start the 4-byte header of the M2TS packet after the
    whole ones before them: its copy bits the last packet's, its arrival time the last packet's plus a step like the
    last two. A recorder's clock runs forward by small steps (up to `FORWARD_STEPS` of the largest; a longer gap, as
    where null packets were left out, reads as a cut on the packet's boundary: a shorter clip); FFmpeg's, without a
    mux rate, by a constant step modulo 2^30 - 1 (any size, backwards too), which the next one repeats. True where
    the tail holds too few packets to tell."""
    end = len(tail) - rest
    if end < 3 * size:
        return True
    heads = [int.from_bytes(tail[end - k * size:end - k * size + 4], "big") for k in (3, 2, 1)]
    stamps = [h % ATS for h in heads]
    steps = [(b - a + ATS // 2) % ATS - ATS // 2 for a, b in zip(stamps, stamps[1:], strict=False)]  # signed
    if 0 <= min(steps) and max(steps) < SMALL_STEP:  # a clock running forward
        low, span = stamps[-1], FORWARD_STEPS * max(steps) + 2
    else:  # a constant step, give or take FFmpeg's wrap at 2^30 - 1
        spread = max(steps) - min(steps) + 2
        low, span = (stamps[-1] + min(steps) - spread) % ATS, max(steps) - min(steps) + 2 * spread
    if span >= ATS:
        return True
    shift = 8 * (4 - rest)
    prefix = int.from_bytes(tail[end:], "big")
    first, last = prefix << shift, ((prefix + 1) << shift) - 1  # the headers that start with those bytes
    copy = heads[-1] - stamps[-1]
    ranges = [(low, min(low + span, ATS - 1))] + ([(0, low + span - ATS)] if low + span >= ATS else [])
    return any(copy + a <= last and first <= copy + b for a, b in ranges)


def _packets_end(tail: bytes, size: int, sync: int, rest: int) -> bool:
    """Whether two whole packets of ``size`` (sync byte at ``sync``) end ``rest`` bytes before the end of ``tail``."""
    end = len(tail) - rest
    return end >= 2 * size and tail[end - size + sync] == SYNC and tail[end - 2 * size + sync] == SYNC


def _head(src: str | Path | bytes | bytearray | memoryview, n: int) -> bytes:
    if isinstance(src, bytes | bytearray | memoryview):
        return bytes(memoryview(src)[:n])
    with open(src, "rb") as fh:
        return fh.read(n)


def starts_as_mpegts(src: str | Path | bytes | bytearray | memoryview) -> str | None:
    """``"mpegts"`` when the file starts with three whole transport packets of a size in `PACKETS` (sync bytes
    0x47 one packet apart), else None. FFmpeg's format probe gives up on some tiny complete TS files (a 2-frame
    clip of 1.5 KB failed with EOF while 1 and 3 frames opened): the reader then names the format."""
    return "mpegts" if head_packets(src) else None


def head_packets(src: str | Path | bytes | bytearray | memoryview) -> tuple[tuple[int, int], ...]:
    """The (size, sync offset) of each of `PACKETS` in which the file starts with three whole transport packets (sync
    bytes 0x47 one packet apart): its own packet size (two only by a chance alignment); none for a file that does not
    start on a packet."""
    head = _head(src, 3 * max(size for size, _ in PACKETS))
    return tuple((size, sync) for size, sync in PACKETS
                 if len(head) >= 3 * size and all(head[k * size + sync] == SYNC for k in range(3)))
