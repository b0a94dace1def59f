"""The fields of HEVC parameter sets and slice headers that tell which pictures a picture keeps for reference: its
POC LSB and its short-term reference picture set (H.265 7.3.2.2, 7.3.6.1, 7.3.7, 7.4.8), and the stream's highest
TemporalId (``sps_max_sub_layers_minus1``). Each parse raises IndexError where the unit does not parse as the syntax
says (``tools.video_slices.Bits``); ``slice_head`` gives None where the header cannot be told."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tools.video_slices import Bits

SPS, PPS = 33, 34
IDR = frozenset({19, 20})
BLA = frozenset({16, 17, 18})
IRAP = range(16, 24)
DECODED = frozenset({*range(10), *range(16, 22)})
"""The slice NAL unit types FFmpeg's decoder decodes (the reserved ones it skips)."""
SUB_LAYER_NON_REFERENCE = frozenset({0, 2, 4, 6, 8, 10, 12, 14})
"""TRAIL_N, TSA_N, STSA_N, RADL_N, RASL_N, RSV_VCL_N10 / 12 / 14: a picture no picture of its own sub-layer
references (H.265 3.132): at the highest TemporalId, none at all."""
HEAD = 160
"""Bytes of a slice NAL unit read for its header up to its reference picture set (16 + 16 entries of a few bytes
at most)."""
MAX_DELTAS = 16  # (num_negative_pics, num_positive_pics: at most sps_max_dec_pic_buffering_minus1, below 16)


@dataclass(frozen=True)
class Rps:
    """A short-term reference picture set: the POC deltas of the pictures it keeps before the current one (S0, the
    nearest first) and after it (S1), used by it or kept for later ones alike."""

    before: tuple[int, ...]
    after: tuple[int, ...]

    def deltas(self) -> frozenset[int]:
        return frozenset(self.before + self.after)


@dataclass(frozen=True)
class HevcSps:
    sps_id: int
    highest_tid: int  # sps_max_sub_layers_minus1
    log2_max_poc_lsb: int
    separate_colour_plane: bool
    rps: tuple[Rps, ...]  # the SPS's candidate sets
    long_term: bool  # long_term_ref_pics_present_flag


@dataclass(frozen=True)
class HevcPps:
    sps_id: int
    output_flag_present: bool
    extra_slice_header_bits: int


@dataclass(frozen=True)
class SliceHead:
    """A picture's first slice header as far as its references go: its SPS, POC LSB (an IDR's 0) and reference picture
    set (an IDR's empty)."""

    sps: HevcSps
    poc_lsb: int
    rps: Rps


def parse_pps(unit: bytes) -> tuple[int, HevcPps]:
    """The id and first fields of the PPS NAL unit ``unit``."""
    b = Bits(unit[:HEAD], header=2)
    pps_id, sps_id = b.ue(), b.ue()
    b.u(1)  # dependent_slice_segments_enabled_flag
    return pps_id, HevcPps(sps_id, bool(b.u(1)), b.u(3))


def parse_sps(unit: bytes) -> HevcSps:
    """The SPS NAL unit ``unit`` up to its long-term reference flag."""
    b = Bits(unit, header=2)
    b.u(4)  # sps_video_parameter_set_id
    highest = b.u(3)
    b.u(1)  # sps_temporal_id_nesting_flag
    _profile_tier_level(b, highest)
    sps_id, chroma = b.ue(), b.ue()
    separate = chroma == 3 and bool(b.u(1))
    b.ue(), b.ue()  # pic_width_in_luma_samples, pic_height_in_luma_samples
    if b.u(1):  # conformance_window_flag
        for _ in range(4):
            b.ue()
    b.ue(), b.ue()  # bit_depth_luma_minus8, bit_depth_chroma_minus8
    log2_max_poc_lsb = b.ue() + 4
    for _ in range(0 if b.u(1) else highest, highest + 1):  # sub_layer_ordering_info
        b.ue(), b.ue(), b.ue()
    for _ in range(6):  # coding / transform block sizes, transform hierarchy depths
        b.ue()
    if b.u(1) and b.u(1):  # scaling_list_enabled_flag, sps_scaling_list_data_present_flag
        _scaling_list_data(b)
    b.u(2)  # amp_enabled_flag, sample_adaptive_offset_enabled_flag
    if b.u(1):  # pcm_enabled_flag
        b.u(8), b.ue(), b.ue(), b.u(1)
    count = b.ue()
    if count > 64:
        raise IndexError("num_short_term_ref_pic_sets past 64")
    sets: list[Rps] = []
    for i in range(count):
        sets.append(_st_ref_pic_set(b, i, count, sets))
    return HevcSps(sps_id, highest, log2_max_poc_lsb, separate, tuple(sets), bool(b.u(1)))


def slice_head(unit: bytes, pps_of: Callable[[int], HevcPps | None],
               sps_of: Callable[[int], HevcSps | None]) -> SliceHead | None:
    """The references of the picture whose slice NAL unit ``unit`` opens it; None where it is no picture's first
    slice, its PPS or SPS is not known (``pps_of``, ``sps_of``) or its SPS allows long-term references (not read)."""
    kind = (unit[0] >> 1) & 0x3F
    b = Bits(unit[:HEAD], header=2)
    if not b.u(1):  # first_slice_segment_in_pic_flag
        return None
    if kind in IRAP:
        b.u(1)  # no_output_of_prior_pics_flag
    pps = pps_of(b.ue())
    sps = sps_of(pps.sps_id) if pps is not None else None
    if pps is None or sps is None or sps.long_term:
        return None
    b.u(pps.extra_slice_header_bits)  # slice_reserved_flag
    b.ue()  # slice_type
    if pps.output_flag_present:
        b.u(1)
    if sps.separate_colour_plane:
        b.u(2)
    if kind in IDR:
        return SliceHead(sps, 0, Rps((), ()))
    lsb = b.u(sps.log2_max_poc_lsb)
    count = len(sps.rps)
    if not b.u(1):  # short_term_ref_pic_set_sps_flag
        return SliceHead(sps, lsb, _st_ref_pic_set(b, count, count, list(sps.rps)))
    index = b.u((count - 1).bit_length()) if count > 1 else 0
    if index >= count:
        raise IndexError("short_term_ref_pic_set_idx past the SPS's sets")
    return SliceHead(sps, lsb, sps.rps[index])


def _profile_tier_level(b: Bits, highest: int) -> None:
    b.u(32), b.u(32), b.u(32)  # general profile (8 bits), compatibility flags (32), constraint flags (48), level (8)
    present = [(b.u(1), b.u(1)) for _ in range(highest)]  # sub_layer_profile_present_flag, sub_layer_level_present_flag
    if highest:
        b.u(2 * (8 - highest))  # reserved_zero_2bits
    for profile, level in present:
        b.u(88 * profile + 8 * level)


def _scaling_list_data(b: Bits) -> None:
    for size_id in range(4):
        for _ in range(0, 6, 3 if size_id == 3 else 1):
            if not b.u(1):  # scaling_list_pred_mode_flag
                b.ue()  # scaling_list_pred_matrix_id_delta
                continue
            if size_id > 1:
                b.se()  # scaling_list_dc_coef_minus8
            for _ in range(min(64, 1 << (4 + (size_id << 1)))):
                b.se()  # scaling_list_delta_coef


def _st_ref_pic_set(b: Bits, index: int, count: int, sets: list[Rps]) -> Rps:
    """The short-term reference picture set ``index`` (``count``: a slice header's own, after the SPS's ``count``),
    predicted from one of ``sets`` or given outright (7.3.7, 7.4.8: (7-61), (7-62))."""
    if index and b.u(1):  # inter_ref_pic_set_prediction_flag
        ref_index = index - (b.ue() + 1 if index == count else 1)
        if ref_index < 0:
            raise IndexError("delta_idx_minus1 before the first set")
        ref = sets[ref_index]
        delta_rps = (b.ue() + 1) * (-1 if b.u(1) else 1)  # (delta_rps_sign read first)
        n = len(ref.before) + len(ref.after)
        # used_by_curr_pic_flag, and where it is 0 use_delta_flag: whether the set keeps the picture at all
        use = [bool(b.u(1)) or bool(b.u(1)) for _ in range(n + 1)]
        s0 = [d + delta_rps for j, d in reversed(list(enumerate(ref.after, len(ref.before)))) if use[j]]
        s0 += [delta_rps] if use[n] else []
        s0 += [d + delta_rps for j, d in enumerate(ref.before) if use[j]]
        s1 = [d + delta_rps for j, d in reversed(list(enumerate(ref.before))) if use[j]]
        s1 += [delta_rps] if use[n] else []
        s1 += [d + delta_rps for j, d in enumerate(ref.after, len(ref.before)) if use[j]]
        return Rps(tuple(d for d in s0 if d < 0), tuple(d for d in s1 if d > 0))
    negative, positive = b.ue(), b.ue()
    if negative > MAX_DELTAS or positive > MAX_DELTAS:
        raise IndexError("more pictures than a reference picture set holds")
    before, poc = [], 0
    for _ in range(negative):
        poc -= b.ue() + 1
        b.u(1)  # used_by_curr_pic_s0_flag
        before.append(poc)
    after, poc = [], 0
    for _ in range(positive):
        poc += b.ue() + 1
        b.u(1)  # used_by_curr_pic_s1_flag
        after.append(poc)
    return Rps(tuple(before), tuple(after))
