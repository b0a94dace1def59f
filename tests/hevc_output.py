"""A raw HEVC stream some of whose pictures are not for output (``pic_output_flag`` 0): x265 writes none, so its
all-intra output is rewritten: the PPS's ``output_flag_present_flag`` set, and each slice header given the flag after
its ``slice_type`` (one bit more, taken from its byte alignment, so that the slice data stays where it was). x265's
IDR slice header there (``sao=0:wpp=0``, a constant QP): ``slice_qp_delta``, the loop filter flag, the alignment."""

from __future__ import annotations

import re
from pathlib import Path

from tests.h264_fields import annex_b
from tests.test_video import write_elementary

PARAMS = "keyint=1:sao=0:wpp=0:qp=30:bframes=0:log-level=error"


def _rbsp(unit: bytes) -> list[int]:
    data = re.sub(b"\x00\x00\x03", b"\x00\x00", unit[2:])
    return [(b >> (7 - i)) & 1 for b in data for i in range(8)]


def _unit(header: bytes, bits: list[int]) -> bytes:
    return annex_b(header, bytes(int("".join(map(str, bits[i:i + 8])), 2) for i in range(0, len(bits), 8)))


def _ue(bits: list[int], at: int) -> int:
    """The bit position after the Exp-Golomb code at `at`."""
    zeros = 0
    while not bits[at + zeros]:
        zeros += 1
    return at + 2 * zeros + 1


def hidden(path: Path, n: int, hide: set[int]) -> Path:
    """`n` id frames (tests.test_video.id_frames), all IDR pictures; those at `hide` with ``pic_output_flag`` 0."""
    raw = write_elementary(path, "libx265", PARAMS, n).read_bytes()
    units = [u for u in re.split(b"\x00\x00\x00\x01|\x00\x00\x01", raw) if u]
    out, picture = [], 0
    for unit in units:
        kind = (unit[0] >> 1) & 0x3F
        bits = _rbsp(unit)
        if kind == 34:  # PPS: pps_id, sps_id, dependent_slice_segments_enabled_flag, then output_flag_present_flag
            at = _ue(bits, _ue(bits, 0)) + 1
            assert bits[at] == 0
            bits[at] = 1
        elif 16 <= kind <= 21:  # an IRAP slice: first_slice_segment_in_pic_flag, no_output_of_prior_pics_flag, ...
            assert bits[0] == 1, "one slice a picture"
            at = _ue(bits, _ue(bits, 2))  # after pps_id and slice_type
            end = _ue(bits, at) + 1  # slice_qp_delta, slice_loop_filter_across_slices_enabled_flag
            data = -(-(end + 1) // 8) * 8  # where the slice data starts: after the alignment, a 1 and 0s
            assert bits[end] == 1 and not any(bits[end + 1:data]), "not the slice header expected"
            flag = 0 if picture in hide else 1
            bits = bits[:at] + [flag] + bits[at:end] + [1] + [0] * (-(end + 2) % 8) + bits[data:]
            picture += 1
        out.append(_unit(unit[:2], bits))
    path.write_bytes(b"".join(out))
    return path
