"""Transport packets that start a video PES without a PES header (the check of `tools.video_scan.scan` for MPEG-TS).

A transport packet with its payload_unit_start bit set on the video PID begins a PES packet: its payload starts with
the PES start code 00 00 01 (ISO 13818-1). Where damage hits that start code (or the adaptation field's length before
it), FFmpeg's demuxer takes the payload for no PES and skips every byte up to the next PES start on the PID, with no
error and no corrupt flag: a PES of one access unit, a frame, is gone. The clip then reads one frame short, and every
frame shown after the lost one comes out under the index of the frame before it (measured: x264 open-GOP clip cut to a
non-IDR I, a fifth of a packet zeroed over a small B frame's PES header: 30 frames of 31, frames 4..29 shifted). The
packets are read in the size the file's first three show (`tools.mpegts_tail.head_packets`).

Damage to an access unit's own start codes inside an intact PES (its slice's 00 00 01) does the same through the
H.264 parser: it joins the PES's data to the access unit before, and its PES timestamp is lost (measured: a 4-byte
flip a quarter into a packet, two PES of 79 and 154 bytes read as one packet of 233 with the first one's pts). So a
PES timestamp no demuxed packet carries is a frame lost too, and it places the loss: the frames shown before it keep
their indices (`untrusted_from`).

The scan checks the packets' timestamps first: timestamps that go back (files joined, a splice) are refused
(`tools.mpegts_timeline`), so the PES timestamps compared here belong to one rising timeline.
"""

from __future__ import annotations

import bisect
import mmap
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tools.mpegts_tail import SYNC, head_packets, open_bytes

PES_START = b"\x00\x00\x01"

PTS_WRAP = 2**33
"""PES timestamps count modulo 2^33 (FFmpeg's packets may carry them unwrapped)."""


def pes_starts(src: str | Path | bytes | bytearray | memoryview, pid: int) -> list[tuple[int, int | None, bool]]:
    """(byte offset, PES pts or None, header whole) of each transport packet on ``pid`` whose payload_unit_start bit is
    set. Not whole: its payload does not begin with a PES start code (or its adaptation field runs past the packet),
    and FFmpeg drops the PES it begins; or the header's marker bits (the flags byte's 10, the pts's) or its stream id
    (one per PID: the most PES's) are wrong, a damaged header whose timestamp cannot be trusted. A header cut off by
    the file's end or the PID's next PES is taken as whole, without a pts. Empty for a file that does not start on
    transport packets."""
    sizes = head_packets(src)
    if not sizes:
        return []
    size, sync = sizes[0]
    with open_bytes(src) as data:
        found = _starts(data, size, sync, pid)
    ids = [sid for *_, sid in found if sid is not None]
    usual = max(set(ids), key=ids.count) if ids else None
    return [(at, pts, whole and sid in (None, usual)) for at, pts, whole, sid in found]


def _starts(data: bytes | mmap.mmap, size: int, sync: int, pid: int) -> list[tuple[int, int | None, bool, int | None]]:
    """`pes_starts`' rows with each PES's stream id (None without a start code), from the file's bytes `data` in
    transport packets of `size` bytes from `sync`. A PES's first bytes may run on into the PID's next packets (ISO
    13818-1 asks only for its first byte in the packet that starts it): its header is read across them."""
    found: list[tuple[int, int | None, bool, int | None]] = []
    offsets, starts = _on_pid(data, size, sync, pid)
    for k in starts:
        at = offsets[k]
        pes = _payload(data, at)
        if not pes:  # its adaptation field runs to (or past) the packet's end: no PES starts here
            found.append((at, None, False, None))
            continue
        k += 1  # its header cut off by the PID's next PES (or the file's end) is read as far as it goes
        while len(pes) < HEADER and k < len(offsets) and not data[offsets[k] + 1] & 0x40:
            pes, k = pes + _payload(data, offsets[k]), k + 1
        found.append(_row(at, pes))
    return found


def _payload(data: bytes | mmap.mmap, at: int) -> bytes:
    """The payload of the transport packet at `at` (after its adaptation field; none where that fills the packet)."""
    head = data[at:at + 188]
    control = (head[3] >> 4) & 3
    start = 4 if control == 1 else 5 + head[4] if control == 3 else 188
    return head[start:] if start < 188 else b""


HEADER = 14
"""Bytes of a PES that hold its start code, stream id, flags and pts."""

BLOCK = 1 << 16
"""Transport packets whose headers `_on_pid` reads at once (its arrays' memory: a few bytes each)."""


def _on_pid(data: bytes | mmap.mmap, size: int, sync: int, pid: int) -> tuple[list[int], list[int]]:
    """The offsets of the transport packets of `size` bytes from `sync` (each whole: 188 bytes from its sync byte) that
    start with the sync byte and carry ``pid``, and the positions among them of those whose payload_unit_start bit is
    set. Read from their first 3 bytes as arrays, `BLOCK` packets at a time (a copy of their bytes: an array on the
    map itself would keep it from closing): a Python loop over every packet took most of the scan's MPEG-TS check
    (`benchmarks/mpegts_check.py`)."""
    count = len(range(sync, len(data) - 187, size))
    offsets: list[int] = []
    starts: list[int] = []
    for first in range(0, count, BLOCK):
        n, start = min(BLOCK, count - first), sync + first * size
        block = np.frombuffer(data[start:start + (n - 1) * size + 3], np.uint8)
        head = np.lib.stride_tricks.as_strided(block, (n, 3), (size, 1), writeable=False)
        on = np.flatnonzero((head[:, 0] == SYNC) & ((head[:, 1].astype(np.int32) & 0x1F) << 8 | head[:, 2] == pid))
        starts.extend((len(offsets) + np.flatnonzero(head[on, 1] & 0x40)).tolist())
        offsets.extend((start + on * size).tolist())
    return offsets, starts


def _row(at: int, pes: bytes) -> tuple[int, int | None, bool, int | None]:
    """`_starts`' row of the PES starting in the packet at `at` whose first bytes are `pes`."""
    if pes[:3] != PES_START:
        return at, None, False, None
    if len(pes) < 9 or (pes[7] & 0x80 and len(pes) < HEADER):
        return at, None, True, pes[3] if len(pes) > 3 else None
    if pes[6] & 0xC0 != 0x80:  # a video PES's header is MPEG-2's: its flags byte starts with bits 10
        return at, None, False, pes[3]
    if not pes[7] & 0x80:
        return at, None, True, pes[3]
    marked = pes[9] >> 4 in (2, 3) and pes[9] & pes[11] & pes[13] & 1 == 1  # the pts's marker bits
    pts = (pes[9] >> 1 & 7) << 30 | pes[10] << 22 | (pes[11] >> 1) << 15 | pes[12] << 7 | pes[13] >> 1
    return at, pts if marked else None, marked, pes[3]


def untrusted_from(src: str | Path | bytes | bytearray | memoryview, pid: int,
                   packets: Sequence[tuple[int | None, int | None, int | None]],
                   ordered: Sequence[int] | None) -> tuple[int, str] | None:
    """The first frame (presentation order) that a frame the demuxer lost may have shifted or left without its
    reference, and how it was lost; None when no PES of ``pid`` was lost. ``packets``: (byte offset, dts, pts) of each
    demuxed video packet, decode order; ``ordered``: the frames' sorted pts (None: unusable, every frame untrusted).

    Shifted: a PES whose header is gone was decoded after the packet before it, so shown after that packet's dts (pts
    >= dts); one whose pts no packet carries, at that pts. Without its reference: every frame decoded after the loss
    (measured: the B-frames shown before a lost P-frame, decoded after it, came out wrong under their own indices),
    and the frame a PES's data was joined to. The frames shown before all of them are trusted."""
    seen = {p % PTS_WRAP for _, _, p in packets if p is not None}
    for at, pts, header in pes_starts(src, pid):
        if header and (pts is None or pts in seen):
            continue
        before = sum(1 for pos, _, _ in packets if pos is not None and 0 <= pos < at)  # packets decoded before it
        after = [p for _, _, p in packets[max(0, before - (1 if header else 0)):] if p is not None]
        if ordered is None:
            first = 0
        elif not header:
            last_dts = next((dts for _, dts, _ in reversed(packets[:before]) if dts is not None), None)
            first = bisect.bisect_right(ordered, last_dts) if last_dts is not None else 0
        else:
            first = next((i for i, p in enumerate(ordered) if p % PTS_WRAP >= (pts or 0)), len(ordered))
        if ordered is not None and after:
            first = min(first, bisect.bisect_left(ordered, min(after)))
        how = (f"the transport packet at byte {at} starts a video PES without a whole PES header (damaged): the "
               "demuxer drops that PES, a frame") if not header else \
            (f"the video PES at byte {at} (pts {pts}) starts no frame the demuxer gives (its access unit damaged): its "
             "data was joined to another frame's")
        return first, how
    return None
