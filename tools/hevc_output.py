"""HEVC pictures not for output: a slice header's ``pic_output_flag`` 0, where its PPS has
``output_flag_present_flag``. FFmpeg's decoder decodes such a picture (later ones may reference it) and gives no frame
for it, so the scan (``tools.video_scan.scan``) counts none: counted, each read from it on failed, the decoder's frames
one short of the count. The PPS are read from the stream's extradata (an hvcC record or Annex B) and from the packets,
where they may come in band; a stream whose PPS never set the flag (x265 writes none) has no slice header read."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import av

from tools.hevc_headers import IRAP, PPS, HevcPps, parse_pps
from tools.video_slices import Bits, nal_length_size, record_units

HEAD_BYTES = 16
"""Bytes of a NAL unit read: a PPS's first fields or a slice header up to ``pic_output_flag``, under 6 bytes with
their emulation prevention bytes."""
SEARCHED_BYTES = 16384
"""Bytes of an Annex B packet searched first for its parameter sets and first slice (after SEI of a few KiB, as a
rule); the whole packet where they hold no slice (its units up to there seen again: a PPS read twice is the same)."""


class HevcOutput:
    """Tells the HEVC packets whose picture is not for output, in decode order (`shown`)."""

    def __init__(self, extradata: bytes | None) -> None:
        extra = extradata or b""
        self._pps: dict[int, HevcPps] = {}
        self._length = nal_length_size("hevc", extradata)  # (None: Annex B)
        for unit in hvcc_units(extra) if self._length else _units(memoryview(extra), None) if extra else ():
            if (unit[0] >> 1) & 0x3F == PPS:
                self._see_pps(unit)

    def shown(self, packet: av.Packet) -> bool:
        """Whether the decoder gives a frame for `packet`'s picture, by its first slice (True: for output, no slice, or
        one that does not parse)."""
        for unit in _units(memoryview(packet), self._length):
            kind = (unit[0] >> 1) & 0x3F
            if kind == PPS:
                self._see_pps(unit)
            elif kind < 32:
                return self._output(unit, kind)
        return True

    def _see_pps(self, unit: bytes) -> None:
        try:
            pps_id, pps = parse_pps(unit)
        except IndexError:
            return
        self._pps[pps_id] = pps

    def _output(self, unit: bytes, kind: int) -> bool:
        if not any(p.output_flag_present for p in self._pps.values()):
            return True
        b = Bits(unit, header=2)
        try:
            if not b.u(1):  # first_slice_segment_in_pic_flag
                return True
            if kind in IRAP:
                b.u(1)  # no_output_of_prior_pics_flag
            pps = self._pps.get(b.ue())
            if pps is None or not pps.output_flag_present:
                return True
            b.u(pps.extra_slice_header_bits), b.ue()  # slice_reserved_flag(s), slice_type
            return bool(b.u(1))
        except IndexError:
            return True


def _units(data: memoryview, length_size: int | None) -> Iterator[bytes]:
    """The first `HEAD_BYTES` of each NAL unit of the HEVC packet `data` up to its first slice (VCL unit), included:
    length-prefixed (`length_size` bytes) or, when None, Annex B (`SEARCHED_BYTES`)."""
    if length_size is not None:
        i = 0
        while i + length_size < len(data):
            n = int.from_bytes(data[i:i + length_size], "big")
            i += length_size
            if n < 2 or i + n > len(data):
                return
            yield bytes(data[i:i + min(n, HEAD_BYTES)])
            if (data[i] >> 1) & 0x3F < 32:
                return
            i += n
        return
    for head in (bytes(data[:SEARCHED_BYTES]), bytes(data)):  # the whole packet where its head holds no slice
        i = head.find(b"\x00\x00\x01")
        while 0 <= i and i + 5 <= len(head):
            yield head[i + 3:i + 3 + HEAD_BYTES]
            if (head[i + 3] >> 1) & 0x3F < 32:
                return
            i = head.find(b"\x00\x00\x01", i + 3)
        if len(head) == len(data):
            return


def hvcc_units(record: bytes) -> Iterable[bytes]:
    """The parameter sets and SEI of an hvcC record (after its 22 fixed bytes: arrays of NAL units by type)."""
    units: list[bytes] = []
    at = 23
    for _ in range(record[22]):
        if at + 3 > len(record):
            break
        count, at = int.from_bytes(record[at + 1:at + 3], "big"), at + 3
        if (after := record_units(record, at, count, units)) is None:
            break
        at = after
    return units
