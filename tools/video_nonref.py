"""Which H.264 pictures no other picture references, as far as the stream can show it (``H264References``): a damaged
one (a frame the decoder concealed and flagged) damages its own frame alone.

A picture's NAL units say so themselves (nal_ref_idc 0, H.264 7.4.1), but the damage may be in that header: a
reference picture whose nal_ref_idc broke to 0 is decoded as one no picture references, and the frames decoded after
it that referenced it come out wrong and unflagged. The slice headers of the pictures after it tell the two apart
(7.4.3, frame_num): a picture no other references takes the frame_num the next reference picture takes too, while a
reference picture's successor takes the next one (``confirmed``). Only frame pictures are told apart (a stream whose
SPS allows fields: the second field of a reference pair shares its frame_num, and nothing is narrowed)."""

from __future__ import annotations

from dataclasses import dataclass

from tools.h264_field_pairs import H264Sps, h264_parameter_sets
from tools.video_slices import Bits, nal_length_size

HEAD = 32
"""The bytes of a slice NAL unit kept: its header's fields up to frame_num lie well within them."""

KEPT = 64
"""The pictures kept (the last fed): more than a flagged frame comes out after its packet went in
(``tools.video_damage.DROP_HORIZON``, 47)."""


@dataclass(frozen=True)
class _Sets:
    """The parameter sets a slice header's parse needs: the SPS by id, each PPS's SPS id."""

    sps: dict[int, H264Sps]
    pps: dict[int, int]


@dataclass(frozen=True)
class _Picture:
    unreferenced: bool  # every slice says nal_ref_idc 0
    idr: bool
    head: bytes  # the first slice's first HEAD bytes
    sets: _Sets


def slice_heads(data: bytes, length_size: int | None) -> list[bytes]:
    """The first ``HEAD`` bytes of each slice NAL unit (types 1-5) of the H.264 packet ``data`` (length-prefixed by
    ``length_size`` bytes; None: Annex B), in order; those up to a length that runs past the packet."""
    heads = []
    if length_size is None:
        at = data.find(b"\x00\x00\x01")
        while 0 <= at < len(data) - 3:
            if 1 <= data[at + 3] & 0x1F <= 5:
                heads.append(data[at + 3:at + 3 + HEAD])
            at = data.find(b"\x00\x00\x01", at + 3)
        return heads
    at = 0
    while at + length_size < len(data):
        length = int.from_bytes(data[at:at + length_size], "big")
        at += length_size
        if not length or at + length > len(data):
            break
        if 1 <= data[at] & 0x1F <= 5:
            heads.append(data[at:at + min(length, HEAD)])
        at += length
    return heads


class H264References:
    """The pictures fed to one decode of an H.264 stream (``fed``, by tag), to tell whether one that came out damaged
    is one no other references (``confirmed``)."""

    def __init__(self, extradata: bytes | None) -> None:
        self._size = nal_length_size("h264", extradata)
        self._sets = _Sets({}, {})
        if extradata:
            self._learn(extradata, None)
        self._pictures: dict[int, _Picture] = {}

    def _learn(self, data: bytes, extradata: bytes | None) -> None:
        sps, pps = h264_parameter_sets(data, extradata)
        if sps or pps:
            self._sets = _Sets({**self._sets.sps, **{s.sps_id: s for s in sps}}, {**self._sets.pps, **pps})

    def fed(self, tag: int, data: bytes, keyframe: bool, extradata: bytes | None, *, annex_b: bool = False) -> None:
        """The packet ``data`` (a ``keyframe``'s: its parameter sets learnt) went to the decoder under ``tag``;
        ``annex_b``: framed by start codes behind an avcC record (``tools.video_nal_check.start_code_framed``)."""
        if keyframe:
            self._learn(data, None if annex_b else extradata)
        heads = slice_heads(data, None if annex_b else self._size)
        if heads:
            self._pictures[tag] = _Picture(all(not h[0] & 0x60 for h in heads), heads[0][0] & 0x1F == 5, heads[0],
                                           self._sets)
        self._pictures.pop(tag - KEPT, None)

    def says_unreferenced(self, tag: int) -> bool:
        """Whether the picture of ``tag`` says no picture references it (every slice: nal_ref_idc 0)."""
        picture = self._pictures.get(tag)
        return picture is not None and picture.unreferenced

    def confirmed(self, tag: int) -> bool | None:
        """Whether the picture of ``tag``, which says no picture references it, is one: the next reference picture fed
        after it (not an IDR) takes its frame_num; None while none has been fed; False where it cannot be told (a
        header that does not parse, fields allowed, an IDR next, the picture forgotten)."""
        picture = self._pictures.get(tag)
        if picture is None or not picture.unreferenced:
            return False
        later = next((p for t, p in sorted(self._pictures.items()) if t > tag and not p.unreferenced), None)
        if later is None:
            return None
        if later.idr:
            return False
        mine, theirs = _frame_num(picture), _frame_num(later)
        return mine is not None and mine == theirs


def _frame_num(picture: _Picture) -> int | None:
    """The frame_num of ``picture``'s first slice; None where its header does not parse or its SPS allows fields."""
    b = Bits(picture.head)
    try:
        b.ue(), b.ue()  # first_mb_in_slice, slice_type
        sps_id = picture.sets.pps.get(b.ue())
        sps = picture.sets.sps.get(sps_id) if sps_id is not None else None
        if sps is None or not sps.frame_mbs_only:
            return None
        if sps.separate_colour_plane:
            b.u(2)
        return b.u(sps.log2_max_frame_num)
    except IndexError:
        return None
