"""A raw H.264 stream coded as field pictures (PAFF): each frame two I field pictures, top then bottom, each its own
access unit, so FFmpeg's parser splits a frame into two packets and its decoder gives one frame for the pair. No
encoder in PyAV's FFmpeg writes these (libx264's interlacing is MBAFF, one picture per frame; mpeg2video codes frame
pictures), so the bitstream is written here: Main profile, CAVLC, every macroblock I_PCM (raw samples), POC type 2
(output order is decode order). Frame i's samples are all `luma(i)`, gray."""

from __future__ import annotations

WIDTH_MBS, FIELD_HEIGHT_MBS = 4, 2  # 64 x 64 frames of two 64 x 32 fields


def luma(i: int) -> int:
    return 20 + 5 * i


class _Bits:
    def __init__(self) -> None:
        self.bits: list[int] = []

    def u(self, n: int, v: int) -> None:
        self.bits += [(v >> (n - 1 - i)) & 1 for i in range(n)]

    def ue(self, v: int) -> None:  # Exp-Golomb
        n = (v + 1).bit_length()
        self.u(n - 1, 0)
        self.u(n, v + 1)

    def align(self) -> None:
        self.bits += [0] * (-len(self.bits) % 8)

    def rbsp(self) -> bytes:  # with its trailing bits
        self.bits.append(1)
        self.align()
        return bytes(int("".join(map(str, self.bits[i:i + 8])), 2) for i in range(0, len(self.bits), 8))


def annex_b(header: bytes, rbsp: bytes) -> bytes:
    """The NAL unit of `header` and `rbsp` with its start code, emulation prevention bytes added (H.264 and HEVC)."""
    out, zeros = bytearray(), 0
    for b in rbsp:  # emulation prevention
        if zeros >= 2 and b <= 3:
            out.append(3)
            zeros = 0
        out.append(b)
        zeros = zeros + 1 if b == 0 else 0
    return b"\x00\x00\x00\x01" + header + bytes(out)


def _nal(nal_type: int, rbsp: bytes) -> bytes:
    return annex_b(bytes([0x60 | nal_type]), rbsp)  # nal_ref_idc 3


def _sps(sid: int) -> bytes:
    b = _Bits()
    b.u(8, 77), b.u(8, 0), b.u(8, 30)  # Main, level 3
    b.ue(sid), b.ue(0), b.ue(2), b.ue(1)  # id, log2_max_frame_num - 4, POC type 2, one reference frame
    b.u(1, 0), b.ue(WIDTH_MBS - 1), b.ue(FIELD_HEIGHT_MBS - 1)
    b.u(1, 0), b.u(1, 0), b.u(1, 1)  # frame_mbs_only 0 (fields), no MBAFF, direct_8x8_inference
    b.u(1, 0), b.u(1, 0)  # no cropping, no VUI (no timing)
    return _nal(7, b.rbsp())


def _pps(sid: int) -> bytes:
    b = _Bits()
    b.ue(sid), b.ue(sid), b.u(1, 0), b.u(1, 0), b.ue(0), b.ue(0), b.ue(0), b.u(1, 0), b.u(2, 0)  # PPS id = SPS id
    b.ue(0), b.ue(0), b.ue(0)  # QP offsets 0 (se(0) is ue(0))
    b.u(1, 1), b.u(1, 0), b.u(1, 0)  # deblocking control present
    return _nal(8, b.rbsp())


def _field(frame: int, bottom: bool, gop: int, sid: int) -> bytes:
    idr = frame % gop == 0 and not bottom  # the second field of an IDR frame is a non-IDR I picture
    b = _Bits()
    b.ue(0), b.ue(7), b.ue(sid), b.u(4, frame % gop % 16), b.u(1, 1), b.u(1, int(bottom))  # I slice, field_pic_flag
    if idr:
        b.ue(0), b.u(1, 0), b.u(1, 0)  # idr_pic_id; no_output_of_prior_pics, long_term_reference
    else:
        b.u(1, 0)  # sliding-window reference marking
    b.ue(0), b.ue(1)  # slice_qp_delta 0, deblocking off
    for _ in range(WIDTH_MBS * FIELD_HEIGHT_MBS):
        b.ue(25)  # I_PCM
        b.align()
        for v in [luma(frame)] * 256 + [128] * 128:
            b.u(8, v)
    return _nal(5 if idr else 1, b.rbsp())


def field_coded(frames: int, gop: int | None = None, sid: int = 0) -> bytes:
    """The Annex B stream of `frames` frames, each coded as two field pictures; an IDR frame every `gop` (else the
    first only); its SPS and PPS of id `sid`."""
    return _sps(sid) + _pps(sid) + b"".join(_field(i, bottom, gop or frames, sid) for i in range(frames)
                                            for bottom in (False, True))
