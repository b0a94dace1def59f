"""H.264 field pictures (PAFF) in the scan (``tools.video_scan.scan``): which packets code the second field of a pair,
or a field without its pair, that the decoder shows by no frame of its own (`FieldPairs`), from the slice headers read
with their sequence parameter sets."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import av

from tools.video_slices import HEAD_BYTES, Bits, nal_length_size, nal_units, record_units

SLICE_HEAD = 32
"""The bytes of an H.264 slice NAL unit its header's fields up to bottom_field_flag lie well within."""


@dataclass(frozen=True)
class H264Sps:
    """What an H.264 slice header's parse needs of its sequence parameter set."""

    log2_max_frame_num: int
    frame_mbs_only: bool  # False: pictures may be fields (PAFF) or MBAFF frames
    separate_colour_plane: bool
    sps_id: int = 0
    gaps: bool = False  # gaps_in_frame_num_value_allowed_flag: a picture's frame_num may skip values


def _sps(unit: bytes) -> H264Sps:
    b = Bits(unit)
    profile = b.u(8)
    b.u(16)  # constraint flags, level
    sps_id = b.ue()
    separate = False
    if profile in (100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135):
        chroma = b.ue()
        if chroma == 3:
            separate = bool(b.u(1))
        b.ue(), b.ue(), b.u(1)  # bit depths, qpprime_y_zero_transform_bypass
        if b.u(1):  # seq_scaling_matrix_present
            for i in range(12 if chroma == 3 else 8):
                if b.u(1):
                    last = nxt = 8
                    for _ in range(16 if i < 6 else 64):
                        if nxt:
                            nxt = (last + b.se()) % 256
                        last = nxt or last
    log2_max_frame_num = b.ue() + 4
    poc_type = b.ue()
    if poc_type == 0:
        b.ue()
    elif poc_type == 1:
        b.u(1), b.se(), b.se()
        for _ in range(b.ue()):
            b.se()
    b.ue()  # max_num_ref_frames
    gaps = bool(b.u(1))
    b.ue(), b.ue()  # width and height in macroblocks
    return H264Sps(log2_max_frame_num, bool(b.u(1)), separate, sps_id, gaps)


def h264_parameter_sets(data: bytes | memoryview, extradata: bytes | None) -> tuple[list[H264Sps], dict[int, int]]:
    """The sequence parameter sets in the H.264 packet `data`, in order, and its picture parameter sets' SPS ids by
    PPS id (`extradata`: the stream's avcC record or nothing: Annex B; length-prefixed, only the units ahead of its
    first slice are looked at, and none copied past them), or, where `extradata` is None and `data` is an avcC record
    (its first byte 1), that record's (Annex B extradata parses as a packet). A unit that does not parse is left out."""
    size = nal_length_size("h264", extradata)
    if extradata is None and data[:1] == b"\x01":  # an avcC record
        units = _record_units(bytes(data))
    elif size is not None:
        units = list(_ahead_of_slices(memoryview(data), size))
    else:
        units = _annex_b_ahead_of_slices(memoryview(data))
    sps, pps = [], {}
    for unit in units:
        try:
            if unit[:1] and unit[0] & 0x1F == 7:
                sps.append(_sps(unit))
            elif unit[:1] and unit[0] & 0x1F == 8:
                b = Bits(unit[:16])
                pps_id = b.ue()
                pps[pps_id] = b.ue()
        except IndexError:
            continue
    return sps, pps


def _record_units(record: bytes) -> list[bytes]:
    """The SPS and PPS of an avcC record (numOfSequenceParameterSets in its byte 5, each 16-bit length and unit, then
    numOfPictureParameterSets and theirs); those up to one that runs past its end."""
    units: list[bytes] = []
    at = 6
    for count_at in (5, None):
        if count_at is None:
            if at >= len(record):
                break
            count, at = record[at], at + 1
        else:
            count = record[count_at] & 0x1F if len(record) > count_at else 0
        if (after := record_units(record, at, count, units)) is None:
            break
        at = after
    return units


def _annex_b_ahead_of_slices(data: memoryview) -> list[bytes]:
    """The NAL units of the Annex B H.264 packet (or extradata) `data` ahead of its first slice, looked for in its first
    `HEAD_BYTES` (those ahead of a slice there are whole), the whole of it only where they hold no slice."""
    head = bytes(data[:HEAD_BYTES])
    while True:
        units: list[bytes] = []
        i = head.find(b"\x00\x00\x01")
        while 0 <= i < len(head) - 3:
            if 1 <= head[i + 3] & 0x1F <= 5:
                return units
            end = head.find(b"\x00\x00\x01", i + 3)
            if unit := head[i + 3:end if end >= 0 else len(head)].rstrip(b"\x00"):
                units.append(unit)
            i = end
        if len(head) == len(data):
            return units
        head = bytes(data)


def opens_with_slice(data: memoryview, length_size: int | None) -> bool:
    """Whether nothing but an access unit delimiter comes ahead of the first slice of the H.264 packet `data`
    (length-prefixed by `length_size` bytes; None: Annex B): no set to learn (`h264_parameter_sets` finds none). Most
    packets open so (MPEG-TS with a delimiter): their first unit or two are read, not the 4 KiB head of an Annex B one."""
    if length_size is not None:
        at = length_size
        if at < len(data) and data[at] & 0x1F == 9:  # (a delimiter: the unit after it)
            at += int.from_bytes(data[:length_size], "big") + length_size
        return at < len(data) and 1 <= data[at] & 0x1F <= 5
    head = bytes(data[:16])
    start = head.find(b"\x00\x00\x01")
    if 0 <= start < len(head) - 3 and head[start + 3] & 0x1F == 9:
        start = head.find(b"\x00\x00\x01", start + 3)
    return 0 <= start < len(head) - 3 and 1 <= head[start + 3] & 0x1F <= 5


def _ahead_of_slices(data: memoryview, length_size: int) -> Iterator[bytes]:
    """The NAL units of the length-prefixed H.264 packet `data` ahead of its first slice (parameter sets, SEI)."""
    i = 0
    while i + length_size < len(data):
        n = int.from_bytes(data[i:i + length_size], "big")
        i += length_size
        if n == 0 or i + n > len(data) or 1 <= data[i] & 0x1F <= 5:
            return
        yield bytes(data[i:i + n])
        i += n


SLICE_HEADERS = (1, 2, 5)
"""H.264 NAL unit types that open with a slice header: a slice (non-IDR, IDR) or data partition A (B and C open with a
slice_id instead)."""


def h264_pictures(data: bytes, extradata: bytes | None,
                  sps_of: Callable[[int], H264Sps | None]) -> list[tuple[int, bool] | None]:
    """The pictures the H.264 access unit(s) `data` codes, in order, each ``(frame_num, bottom_field_flag)`` for a field
    or None for a frame picture (or a slice that does not parse, or whose SPS, `sps_of` its PPS id, is not known): a
    slice whose first_mb_in_slice is 0 starts one. Both fields of a frame may share a packet (an MP4 sample of a
    frame); empty: no slice."""
    pictures: list[tuple[int, bool] | None] = []
    for unit in slice_units(data, extradata):
        try:
            first_mb, sps, frame_num, b = slice_head(unit, sps_of)
            field = (frame_num, bool(b.u(1))) if not sps.frame_mbs_only and b.u(1) else None  # (field_pic_flag)
        except IndexError:
            first_mb, field = 0, None
        if first_mb == 0 or not pictures:
            pictures.append(field)
    return pictures


def slice_head(unit: bytes, sps_of: Callable[[int], H264Sps | None]) -> tuple[int, H264Sps, int, Bits]:
    """The first_mb_in_slice of the H.264 slice NAL unit `unit`, its SPS (`sps_of` its PPS id), its frame_num, and
    its header's bits after frame_num (within its first ``SLICE_HEAD`` bytes); IndexError where it does not parse or
    its SPS is not known."""
    b = Bits(unit[:SLICE_HEAD])
    first_mb = b.ue()
    b.ue()  # slice_type
    sps = sps_of(b.ue())
    if sps is None:
        raise IndexError("no SPS")
    if sps.separate_colour_plane:
        b.u(2)
    return first_mb, sps, b.u(sps.log2_max_frame_num), b


def slice_units(data: bytes, extradata: bytes | None) -> list[bytes]:
    """The slice NAL units of the H.264 packet `data` (Annex B, `extradata` no avcC record: the first ``SLICE_HEAD``
    bytes of each, the packet not split); none where a length runs past the packet."""
    if nal_length_size("h264", extradata) is not None:
        return [u for u in nal_units(data, "h264", extradata) if u[0] & 0x1F in SLICE_HEADERS]
    slices, i = [], data.find(b"\x00\x00\x01")
    while 0 <= i < len(data) - 3:
        if data[i + 3] & 0x1F in SLICE_HEADERS:
            slices.append(data[i + 3:i + 3 + SLICE_HEAD])
        i = data.find(b"\x00\x00\x01", i + 3)
    return slices


class FieldPairs:
    """Finds, in decode order, the H.264 packets that code a field picture the decoder gives no frame of its own for
    (PAFF: FFmpeg's parser gives each field picture its own packet, its decoder one frame for the two), as FFmpeg's
    decoder pairs them (``h264_field_start``): the field after an unpaired one of the other parity with the same
    frame_num is the pair's second; a field whose pair never comes (the next picture a frame, a field of its parity, or
    one of another frame_num: a capture that starts or ends between two fields, a lost packet) is shown by no frame,
    unless the field before it went unmatched as well (then FFmpeg shows it alone: `unsure`). Only where an SPS allows
    fields (frame_mbs_only_flag 0) are slice headers read, each with the SPS its PPS names (by id: a stream may hold a
    progressive and a field-coded one side by side). The SPS and PPS are looked for in the stream's extradata (an avcC
    record, all of its sets, or Annex B) and ahead of the first slice of every packet, where a new one may come in band
    whatever the record holds (an 'avc3' record holds none; a stream switching between progressive and field coding,
    stream-copied, keeps its first in the record), in any packet: a PPS, or an SPS sent ahead of the IDR picture that
    starts using it (looked for in keyframes alone, sets sent with a P picture were missed, and the fields after them
    each counted as a frame). Packets that code no picture leave the pairing as it is."""

    def __init__(self, extradata: bytes | None, *, annex_b: bool = False) -> None:
        self._extradata = None if annex_b else extradata  # (``annex_b``: start codes behind an avcC record)
        self._size = nal_length_size("h264", self._extradata)  # (None: Annex B)
        self._sps: dict[int, H264Sps] = {}  # by id
        self._pps: dict[int, int] = {}  # PPS id -> SPS id
        self._last: H264Sps | None = None  # the last SPS found
        if extradata:
            self._learn(extradata, None)
        self._first: tuple[int, bool] | None = None  # the last picture, while it is a field without its pair
        self._shown = False  # whether that field was shown alone (FFmpeg: after more than one unmatched field)
        self._unmatched = 0  # fields left unmatched in a row (FFmpeg's missing_fields)
        self.unsure = False
        """Whether fields went unmatched two or more in a row: FFmpeg then shows a field alone, and may show a frame
        twice (a field decoded into a new picture after the one shown): the frames it gives are not counted here."""

    def frames(self, packets: Iterable[av.Packet]) -> Iterator[tuple[av.Packet, bool]]:
        """Each of `packets` (decode order, empty ones included) with whether it codes only fields that give no frame
        of their own (the second of a pair: its frame comes on the first's packet; or one without its pair). A field's
        pair is known at the next picture: until then its packet, and the packets after it, are held back."""
        held: list[av.Packet] = []
        shows = False  # whether the held packet shows a frame, by its pictures before its last
        for packet in packets:
            pictures = self._pictures(packet) if packet.size else []
            if not pictures:
                if held:
                    held.append(packet)
                else:
                    yield packet, False
                continue
            frame = False  # whether this packet shows a frame
            for picture in pictures:
                before, alone = self._next(picture)
                if before is not None and held:  # (the held packet's last field)
                    yield held[0], before and not shows
                    yield from ((p, False) for p in held[1:])
                    held = []
                elif before is not None:  # (a field earlier in this packet)
                    frame = frame or not before
                frame = frame or alone is False
            if self._first is None:
                yield packet, not frame
            else:
                held, shows = [packet], frame
        if held:  # its last field never paired
            yield held[0], not (shows or self._shown)
            yield from ((p, False) for p in held[1:])

    def _next(self, field: tuple[int, bool] | None) -> tuple[bool | None, bool | None]:
        """The next picture, `field` (None: a frame): whether the field before it, unpaired till now, gives no frame
        (None: there is none), and whether this one gives none (None: a field whose pair may follow)."""
        first, shown = self._first, self._shown
        self._first, before = None, None
        if first is not None:
            paired = field is not None and field[1] != first[1]
            self._unmatched = 0 if paired else self._unmatched + 1
            if field is not None and paired and field[0] == first[0]:
                return False, True  # its pair (after a field shown alone FFmpeg may start a new picture: `unsure`)
            before = not shown  # unmatched: shown by no frame unless it was shown alone
        if field is None:
            return before, False
        self._first, self._shown = field, self._unmatched > 1
        self.unsure = self.unsure or self._shown
        return before, None

    def _pictures(self, packet: av.Packet) -> list[tuple[int, bool] | None]:
        """The pictures `packet` codes (`h264_pictures`); one frame picture where fields are not parsed, none where it
        codes no picture."""
        view = memoryview(packet)
        if not opens_with_slice(view, self._size):  # (most packets: none read; else those ahead of its first slice)
            self._learn(view, self._extradata)
        if all(sps.frame_mbs_only for sps in self._sps.values()):
            return [None]
        return h264_pictures(bytes(packet), self._extradata, self._sps_of)

    def _learn(self, data: bytes | memoryview, extradata: bytes | None) -> None:
        sps, pps = h264_parameter_sets(data, extradata)
        self._sps.update((s.sps_id, s) for s in sps)
        self._pps.update(pps)
        self._last = sps[-1] if sps else self._last

    def _sps_of(self, pps_id: int) -> H264Sps | None:
        """The SPS the PPS `pps_id` names; the last one found where either is not known."""
        sps_id = self._pps.get(pps_id)
        return self._sps.get(sps_id, self._last) if sps_id is not None else self._last
