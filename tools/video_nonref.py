"""Which H.264 pictures no other picture references, as far as the stream can show it (``H264References``): a damaged
one (a frame the decoder concealed and flagged) damages its own frame alone.

A picture's NAL units say so themselves (nal_ref_idc 0, H.264 7.4.1), but the damage may be in that header: a
reference picture whose nal_ref_idc broke to 0 is decoded as one no picture references, and the frames decoded after
it that referenced it come out wrong and unflagged. The slice headers of the pictures after it tell the two apart
(7.4.3, frame_num): a picture no other references takes the frame_num of the reference picture before it plus one,
which the next reference picture takes too, while a reference picture's successor takes the one after
(``confirmed``; no gaps allowed: a picture past a gap is not confirmed). Damage that broke the frame_num as well as
nal_ref_idc shows against one of the two. Where nal_ref_idc alone broke, the decoder may flag nothing at all (with
frame threads, in some runs, none of the frames that come out wrong): the same rule shows it as the next picture is
fed (``demoted``: its frame_num two past the last reference picture's), and the frames decoded from it fail as
damaged. Only frame pictures are told apart (a stream whose SPS allows fields: the second field of a reference
pair shares its frame_num, and nothing is narrowed)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

from tools.h264_field_pairs import (
    SLICE_HEAD,
    H264Sps,
    h264_parameter_sets,
    opens_with_slice,
    slice_head,
    slice_units,
)
from tools.video_slices import nal_length_size

KEPT = 64
"""The pictures kept (the last fed): more than a flagged frame comes out after its packet went in
(``tools.video_damage.DROP_HORIZON``, 47)."""


@dataclass(frozen=True)
class _Sets:
    """The parameter sets a slice header's parse needs: the SPS by id, each PPS's SPS id."""

    sps: dict[int, H264Sps]
    pps: dict[int, int]

    def sps_of(self, pps_id: int) -> H264Sps | None:
        sps_id = self.pps.get(pps_id)
        return self.sps.get(sps_id) if sps_id is not None else None


@dataclass(frozen=True)
class _Picture:
    unreferenced: bool  # every slice says nal_ref_idc 0
    idr: bool
    head: bytes  # the first slice's first SLICE_HEAD bytes
    sets: _Sets

    def frame_num(self, *, gapless: bool = False) -> tuple[int, int] | None:
        """Its first slice's frame_num and MaxFrameNum; None where the header does not parse or its SPS allows
        fields (``gapless``: or gaps in frame_num)."""
        parsed = self._parsed
        return None if parsed is None or (gapless and parsed[1].gaps) else parsed[0]

    @cached_property
    def _parsed(self) -> tuple[tuple[int, int], H264Sps] | None:
        """Its header parsed once (``demoted`` asks again with each reference picture fed)."""
        try:
            _, sps, frame_num, _ = slice_head(self.head, self.sets.sps_of)
        except IndexError:
            return None
        return ((frame_num, 1 << sps.log2_max_frame_num), sps) if sps.frame_mbs_only else None


class H264References:
    """The pictures fed to one decode of an H.264 stream (``fed``, by tag), to tell whether one that came out damaged
    is one no other references (``confirmed``)."""

    codec: ClassVar[str] = "h264"

    def __init__(self, extradata: bytes | None) -> None:
        self._sets = _Sets({}, {})
        if extradata:
            self._learn(extradata, None)
        self._pictures: dict[int, _Picture] = {}
        self._skipped: set[int] = set()  # tags a discarded picture was fed under (`skipped`; the next one's tag)

    def _learn(self, data: bytes, extradata: bytes | None) -> None:
        sps, pps = h264_parameter_sets(data, extradata)
        if sps or pps:
            self._sets = _Sets({**self._sets.sps, **{s.sps_id: s for s in sps}}, {**self._sets.pps, **pps})

    def fed(self, tag: int, data: bytes, extradata: bytes | None, *, annex_b: bool = False,
            discarded: bool = False) -> list[int]:
        """The packet ``data`` went to the decoder under ``tag``, its parameter sets learnt (any packet's, in decode
        order: a PPS under a new id may come ahead of a P-frame's slice, which names it; learnt from keyframes alone, the
        slices after it did not parse, and a flagged picture no other references failed the frames after it);
        ``annex_b``: framed by start codes behind an avcC record (``tools.video_nal_check.start_code_framed``).
        The tags of the pictures it shows reference pictures broken to nal_ref_idc 0 (``demoted``). A ``discarded``
        one (its frame dropped, under the next one's tag) is not kept, nor read: ``skipped``."""
        if discarded:
            self.skipped(tag)
            return []
        framing = None if annex_b else extradata
        if not opens_with_slice(memoryview(data), nal_length_size("h264", framing)):  # (most: nothing ahead of it)
            self._learn(data, framing)
        heads = [unit[:SLICE_HEAD] for unit in slice_units(data, framing)]
        if heads:
            self._pictures[tag] = _Picture(all(not h[0] & 0x60 for h in heads), heads[0][0] & 0x1F == 5, heads[0],
                                           self._sets)
        for old in [t for t in self._pictures if t <= tag - KEPT]:  # (tags skip: `fed_with_pictures`)
            del self._pictures[old]
        self._skipped = {t for t in self._skipped if t > tag - KEPT}
        return self.demoted(tag) if heads else []

    def skipped(self, tag: int) -> None:
        """A picture marked discard (an edit list's cut) went to the decoder under ``tag`` (the next one's): not kept,
        its frame_num unknown, so none of the pictures around it is shown ``demoted``."""
        self._skipped.add(tag)

    def demoted(self, tag: int) -> list[int]:
        """The tags of the pictures fed since the reference picture before the picture of ``tag`` (no IDR), each of
        which says no picture references it, that are reference pictures by their frame_num (7.4.3, no gaps allowed):
        the one after the reference picture's before it, as the picture of ``tag`` takes the one after theirs. Any
        picture after it tells it, one no other references too (it takes the last reference picture's frame_num plus
        one): told at the next reference picture alone, a B-frame decoded between the two that references it was
        handed out wrong (one thread, settled by a flush: the next reference picture never fed). Its nal_ref_idc is the
        damage, the rest intact: the decoder drops it from its references, flags nothing (with frame threads, nothing at
        all), and the frames that reference it come out wrong. None where a discarded picture was fed between them
        (``skipped``), or a header does not parse."""
        later = self._pictures.get(tag)
        theirs = later.frame_num(gapless=True) if later is not None and not later.idr else None
        if theirs is None:
            return []
        tags = sorted(t for t in self._pictures if t < tag)
        first = next((t for t in reversed(tags) if not self._pictures[t].unreferenced), None)
        if first is None or any(first < t <= tag for t in self._skipped):
            return []
        previous = self._pictures[first].frame_num(gapless=True)
        demoted = []
        for t in (t for t in tags if t > first):
            mine = self._pictures[t].frame_num(gapless=True)
            if previous is not None and mine is not None and mine[0] == (previous[0] + 1) % mine[1] and \
                    theirs[0] == (mine[0] + 1) % mine[1]:
                demoted.append(t)
        return demoted

    def says_unreferenced(self, tag: int) -> bool:
        """Whether the picture of ``tag`` says no picture references it (every slice: nal_ref_idc 0)."""
        picture = self._pictures.get(tag)
        return picture is not None and picture.unreferenced

    def confirmed(self, tag: int) -> bool | None:
        """Whether the picture of ``tag``, which says no picture references it, is one: it takes the frame_num of the
        reference picture fed before it plus one, and the next reference picture fed after it (not an IDR) takes the
        same; None while none has been fed after it; False where it cannot be told (a header that does not parse,
        fields allowed, an IDR, no reference picture kept before it, the picture forgotten). A reference picture
        broken to nal_ref_idc 0 whose frame_num broke to its successor's too is one more than its predecessor's."""
        picture = self._pictures.get(tag)
        if picture is None or not picture.unreferenced:
            return False
        tags = sorted(self._pictures)
        before = next((self._pictures[t] for t in reversed(tags) if t < tag and not self._pictures[t].unreferenced),
                      None)
        later = next((self._pictures[t] for t in tags if t > tag and not self._pictures[t].unreferenced), None)
        if later is None:
            return None
        if before is None or picture.idr or later.idr:
            return False
        mine, previous, theirs = picture.frame_num(), before.frame_num(), later.frame_num()
        if mine is None or previous is None or theirs is None:
            return False
        return mine == theirs and mine[0] == (previous[0] + 1) % mine[1]


def demoted_damage(tag: int) -> str:
    """What the watch names for the picture of packet ``tag`` that the stream shows a reference picture whose
    nal_ref_idc broke to 0 (``H264References.demoted``)."""
    return (f"in packet {tag} of the decode (decode order), a reference picture whose slices say no frame references "
            "it (nal_ref_idc 0, against the frame_nums around it): the decoder dropped it from its references, no "
            "error, and the frames decoded after it up to the next keyframe may reference it")
