"""Which HEVC pictures no other picture references, as far as the stream can show it (``HevcReferences``): a damaged
one damages its own frame alone (the HEVC case of ``tools.video_nonref``).

A picture's NAL units say so themselves: every slice of a sub-layer non-reference type (TRAIL_N, TSA_N, STSA_N,
RADL_N, RASL_N; H.265 3.132) at the stream's highest TemporalId (``sps_max_sub_layers_minus1``): no picture of its
own sub-layer references it, and there is no higher one. But the damage may be in that header: a reference picture
whose type broke to a non-reference one (TRAIL_R to TRAIL_N is one bit) is kept all the same, as FFmpeg's decoder
marks its references by the reference picture sets of the pictures after it (8.3.2), not by their types, and the
frames decoded after it that reference it come out wrong and unflagged. The next picture's set tells the two apart
(``confirmed``): it names every picture that it or any picture after it in decode order may reference (7.4.8), so a
picture it does not name is one no later picture references; and as such a picture adds nothing to the pictures
kept, the next picture's set names none that the picture's own set (the decoder marks by it, damaged or not) did not
keep. POCs compare as FFmpeg derives them (8.3.1, ``ff_hevc_compute_poc``), from the same previous TemporalId-0
reference picture. Not told (nothing narrowed): an SPS not seen, long-term references allowed, a header that does
not parse, a packet of more than one picture, a picture not followed by one."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from tools.hevc_headers import (
    BLA,
    DECODED,
    IDR,
    PPS,
    SPS,
    SUB_LAYER_NON_REFERENCE,
    HevcPps,
    HevcSps,
    SliceHead,
    parse_pps,
    parse_sps,
    slice_head,
)
from tools.hevc_output import hvcc_units
from tools.video_nonref import KEPT
from tools.video_slices import nal_length_size, nal_units

NOT_PREV_TID0 = frozenset({0, 2, 4, 6, 7, 8, 9})
"""Slice types whose picture, at TemporalId 0 too, is no prevTid0Pic for the POCs after it (8.3.1: RADL, RASL and
sub-layer non-reference pictures), as FFmpeg's decoder leaves them out."""


@dataclass(frozen=True)
class _Picture:
    tag: int
    discarded: bool  # (fed to the decoder, its frame dropped: ``tag_discarded``)
    unreferenced: bool  # every slice says no picture references it
    kind: int  # its first slice's NAL unit type
    head: SliceHead | None
    poc: int | None  # FFmpeg's POC above the previous TemporalId-0 reference picture's POC MSB; None: not known


class HevcReferences:
    """The pictures fed to one decode of an HEVC stream (``fed``, in decode order), to tell whether one that came out
    damaged is one no other references (``confirmed``)."""

    codec: ClassVar[str] = "hevc"

    def __init__(self, extradata: bytes | None) -> None:
        self._sps: dict[int, HevcSps] = {}
        self._pps: dict[int, HevcPps] = {}
        extra = extradata or b""
        self._learn(hvcc_units(extra) if nal_length_size("hevc", extra) else nal_units(extra, "hevc", None))
        self._pictures: list[_Picture] = []
        self._prev_lsb: int | None = None  # the POC LSB of the last prevTid0Pic fed (8.3.1)

    def _learn(self, units: Iterable[bytes]) -> None:
        for unit in units:
            kind = (unit[0] >> 1) & 0x3F if unit else -1
            try:
                if kind == SPS:
                    sps = parse_sps(unit)
                    self._sps[sps.sps_id] = sps
                elif kind == PPS:
                    pps_id, pps = parse_pps(unit)
                    self._pps[pps_id] = pps
            except IndexError:
                continue

    def fed(self, tag: int, data: bytes, extradata: bytes | None, *, annex_b: bool = False,
            discarded: bool = False) -> list[int]:
        """The packet ``data`` went to the decoder under ``tag`` (``discarded``: one whose frame the reader drops, under
        the next one's tag; its set counts all the same). Its parameter sets are learnt (a keyframe's or not);
        ``annex_b`` is H.264's (``tools.video_nal_check.start_code_framed``). No picture is told a reference picture
        whose header broke to a non-reference type (H.264's ``demoted``): none."""
        del annex_b
        units = nal_units(data, "hevc", extradata)
        self._learn([u for u in units if (u[0] >> 1) & 0x3F in (SPS, PPS)])
        slices = [u for u in units if len(u) > 2 and (u[0] >> 1) & 0x3F < 32]
        if not slices:
            return []
        kind = (slices[0][0] >> 1) & 0x3F
        head = None
        if kind in DECODED and sum(u[2] >> 7 for u in slices) == 1:  # (first_slice_segment_in_pic_flag: one picture)
            try:
                head = slice_head(slices[0], self._pps.get, self._sps.get)
            except IndexError:
                head = None
        tids = {(u[1] & 7) - 1 for u in slices}
        unreferenced = head is not None and tids == {head.sps.highest_tid} and all(
            (u[0] >> 1) & 0x3F in SUB_LAYER_NON_REFERENCE for u in slices)
        self._pictures.append(_Picture(tag, discarded, unreferenced, kind, head, self._poc(kind, head)))
        if kind in DECODED and tids == {0} and kind not in NOT_PREV_TID0:  # a prevTid0Pic
            self._prev_lsb = head.poc_lsb if head is not None else None
        while self._pictures[0].tag <= tag - KEPT:  # (tags skip: `fed_with_pictures`)
            del self._pictures[0]
        return []

    def _poc(self, kind: int, head: SliceHead | None) -> int | None:
        """The POC of a picture (its first slice ``head``, of NAL unit type ``kind``) as FFmpeg derives it, above the
        MSB of the previous TemporalId-0 reference picture (an IDR's 0, a BLA's its LSB)."""
        if head is None or kind in IDR:
            return None if head is None else 0
        lsb, prev, half = head.poc_lsb, self._prev_lsb, 1 << (head.sps.log2_max_poc_lsb - 1)
        if kind in BLA or prev is None:
            return lsb if kind in BLA else None
        return lsb + (2 * half if lsb < prev and prev - lsb >= half else -2 * half if lsb - prev > half else 0)

    def _at(self, tag: int) -> int | None:
        """Where the picture fed last under ``tag`` (not a discarded one) lies among those kept."""
        return next((i for i in range(len(self._pictures) - 1, -1, -1)
                     if self._pictures[i].tag == tag and not self._pictures[i].discarded), None)

    def says_unreferenced(self, tag: int) -> bool:
        """Whether the picture of ``tag`` says no picture references it (every slice a sub-layer non-reference type at
        the highest TemporalId)."""
        at = self._at(tag)
        return at is not None and self._pictures[at].unreferenced

    def confirmed(self, tag: int) -> bool | None:
        """Whether the picture of ``tag``, which says no picture references it, is one: the picture fed next (an IDR
        or BLA picture, which ends every reference; else) does not name it in its reference picture set, and names
        none that the picture's own set did not keep; None while none has been fed after it; False where it cannot be
        told (a header that does not parse, POCs not known, another SPS's POCs, the picture forgotten)."""
        at = self._at(tag)
        if at is None or not self._pictures[at].unreferenced:
            return False
        if at + 1 == len(self._pictures):
            return None
        mine, after = self._pictures[at], self._pictures[at + 1]
        if after.head is None or mine.head is None or mine.poc is None:
            return False
        if after.kind in IDR or after.kind in BLA:
            return True
        if after.poc is None or after.head.sps.log2_max_poc_lsb != mine.head.sps.log2_max_poc_lsb:
            return False
        theirs = {after.poc - mine.poc + delta for delta in after.head.rps.deltas()}  # (POCs from mine)
        return 0 not in theirs and theirs <= mine.head.rps.deltas()
