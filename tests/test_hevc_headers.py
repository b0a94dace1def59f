"""HEVC slice headers read for their reference picture sets (``tools.hevc_headers``): a set given outright, one of the
SPS's, or one predicted from another (H.265 7.4.8, (7-61) and (7-62)), which x265 does not write (the clips of
``tests.test_video_hevc_nonref`` give theirs outright)."""

from __future__ import annotations

import pytest

from tools.hevc_headers import HevcPps, HevcSps, Rps, slice_head


def _ue(value: int) -> str:
    code = bin(value + 1)[2:]
    return "0" * (len(code) - 1) + code


def _unit(kind: int, bits: str) -> bytes:
    """A NAL unit of type ``kind`` (TemporalId 0) whose RBSP is ``bits`` and its stop bit."""
    bits += "1"
    bits += "0" * (-len(bits) % 8)
    return bytes([kind << 1, 1]) + int(bits, 2).to_bytes(len(bits) // 8, "big")


SETS = (Rps((-1, -3), (2,)), Rps((-2,), ()))
PPS = HevcPps(sps_id=0, output_flag_present=False, extra_slice_header_bits=0)


def _head(kind: int, bits: str, *, long_term: bool = False):  # noqa: ANN202
    sps = HevcSps(sps_id=0, highest_tid=0, log2_max_poc_lsb=8, separate_colour_plane=False, rps=SETS,
                  long_term=long_term)
    return slice_head(_unit(kind, bits), {0: PPS}.get, {0: sps}.get)


FIRST = "1" + _ue(0) + _ue(1) + "00000101"  # first slice, PPS 0, a P slice, POC LSB 5


@pytest.mark.parametrize(("flags", "want"), [
    ("1111", Rps((-1, -2, -4), (1,))),  # every picture of set 0 kept, and the one delta_rps names
    ("1" + "00" + "11", Rps((-1, -2), (1,))),  # the second (-3, now -4) dropped: used_by_curr 0, use_delta 0
    ("1" + "01" + "1" + "00", Rps((-2, -4), (1,))),  # -3 kept for later (use_delta 1), delta_rps's own dropped
])
def test_a_slice_s_set_predicted_from_the_sps_s_shifts_its_deltas(flags, want):
    """The slice's own set (short_term_ref_pic_set_sps_flag 0) predicted from the SPS's set 0 (-1, -3; +2; the SPS
    holds 2: delta_idx_minus1 1) by delta_rps -1: each delta one less where its flags keep it (used_by_curr_pic_flag,
    else use_delta_flag), and -1 itself where the last flags keep it, in the order (7-61) and (7-62) give."""
    bits = FIRST + "0" + "1" + _ue(1) + "1" + _ue(0) + flags  # inter flag, delta_idx_minus1 1, sign -, |delta| 1
    head = _head(1, bits)
    assert head is not None and head.poc_lsb == 5 and head.rps == want


def test_a_slice_names_one_of_the_sps_s_sets():
    """short_term_ref_pic_set_sps_flag 1: short_term_ref_pic_set_idx, Ceil(Log2(2)) = 1 bit."""
    assert _head(1, FIRST + "1" + "1").rps == SETS[1]
    assert _head(1, FIRST + "1" + "0").rps == SETS[0]


def test_an_explicit_set_and_the_headers_not_told():
    """A set given outright (2 before, 1 after: deltas minus 1, each with its used flag); an IDR's, empty; None for a
    slice that is not the picture's first or whose SPS allows long-term references; IndexError for one cut short."""
    explicit = _ue(2) + _ue(1) + _ue(0) + "1" + _ue(1) + "0" + _ue(2) + "1"  # -1, -3 (not used by it); +3
    assert _head(1, FIRST + "0" + "0" + explicit).rps == Rps((-1, -3), (3,))  # (inter_ref_pic_set_prediction_flag 0)
    assert _head(19, "1" + "0" + _ue(0) + _ue(2)).rps == Rps((), ())  # an IDR (no_output_of_prior_pics_flag)
    assert _head(1, "0" + FIRST[1:]) is None  # not the picture's first slice
    assert _head(1, FIRST + "1" + "1", long_term=True) is None  # long-term references (not read)
    with pytest.raises(IndexError):
        _head(1, FIRST[:6])  # (the header cut short)
