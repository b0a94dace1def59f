"""Test helpers: H.264 clips rewritten at the NAL level (a PPS under a new id sent in band, in a non-key packet, and
the slices from there on naming it), remuxed into MP4 with the same timestamps."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np

from tests.encoded_clips import write_rgb_clip
from tests.test_video_concealed import _gradient_ids


def cavlc_clip(path: Path, n: int = 40, gop: int = 12) -> Path:
    """An H.264 MP4 (B-frames, keyframes every ``gop``) coded with CAVLC: its slice data follows the header with no
    alignment, so a header field may change its length (``with_pps_id``)."""
    return write_rgb_clip(path, _gradient_ids(n), "libx264", rate=16, options={"x264-params": "cabac=0"}, gop=gop)


def _ue(v: int) -> str:
    code = f"{v + 1:b}"
    return "0" * (len(code) - 1) + code


def _skip_ue(bits: str, at: int) -> int:
    zeros = len(bits[at:]) - len(bits[at:].lstrip("0"))
    return at + 2 * zeros + 1


def _rbsp(unit: bytes) -> str:
    out, zeros = bytearray(), 0
    for b in unit[1:]:
        if zeros >= 2 and b == 3:
            zeros = 0
            continue
        out.append(b)
        zeros = zeros + 1 if b == 0 else 0
    return "".join(f"{b:08b}" for b in out)


def _unit(header: int, bits: str) -> bytes:
    """The NAL unit of ``header`` and the RBSP ``bits`` (its payload, the trailing bits added), escaped."""
    bits += "1" + "0" * (-(len(bits) + 1) % 8)
    out, zeros = bytearray([header]), 0
    for b in int(bits, 2).to_bytes(len(bits) // 8, "big"):
        if zeros >= 2 and b <= 3:
            out.append(3)
            zeros = 0
        out.append(b)
        zeros = zeros + 1 if b == 0 else 0
    return bytes(out)


def with_pps_id(unit: bytes, pps_id: int) -> bytes:
    """The slice (its pic_parameter_set_id, after two Exp-Golomb fields) or PPS (its first) ``unit`` naming
    ``pps_id``; a CAVLC slice's data shifted after it."""
    bits = _rbsp(unit).rstrip("0")[:-1]  # (the trailing bits)
    at = 0 if unit[0] & 0x1F == 8 else _skip_ue(bits, _skip_ue(bits, 0))
    return _unit(unit[0], bits[:at] + _ue(pps_id) + bits[_skip_ue(bits, at):])


def _units(data: bytes) -> list[bytes]:
    units, at = [], 0
    while at < len(data):
        size = int.from_bytes(data[at:at + 4], "big")
        units.append(data[at + 4:at + 4 + size])
        at += 4 + size
    return units


def _joined(units: list[bytes]) -> bytes:
    return b"".join(len(u).to_bytes(4, "big") + u for u in units)


def pps_switched(src: Path, dst: Path, at: int, pps_id: int = 1) -> Path:
    """``src`` (4-byte lengths, its PPS in the avcC record) remuxed with packet ``at`` (decode order) carrying a copy
    of the record's PPS under ``pps_id`` ahead of its slices, and the slices from it on naming that one."""
    with av.open(str(src)) as i, av.open(str(dst), "w") as o:
        stream = i.streams.video[0]
        record = bytes(stream.codec_context.extradata)
        past = 8 + int.from_bytes(record[6:8], "big")  # (past the record's one SPS: its PPS count, length, unit)
        pps = with_pps_id(record[past + 3:past + 3 + int.from_bytes(record[past + 1:past + 3], "big")], pps_id)
        out = o.add_stream_from_template(stream)
        packets = [p for p in i.demux(stream) if p.size]
        for k, p in enumerate(packets):
            units = _units(bytes(p))
            if k >= at:
                units = [with_pps_id(u, pps_id) if u[0] & 0x1F in (1, 5) else u for u in units]
            if k == at:
                units = [pps, *units]
            q = av.Packet(_joined(units))
            q.pts, q.dts, q.time_base, q.is_keyframe = p.pts, p.dts, p.time_base, p.is_keyframe
            q.stream = out
            o.mux(q)
    return dst


def frames_of(path: Path) -> np.ndarray:
    with av.open(str(path)) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])


def remuxed(src: Path, dst: Path, *, annex_b: bool | set[int] = False, tail: bytes = b"") -> Path:
    """``src`` (4-byte lengths) remuxed into ``dst``: each NAL unit framed by a start code (00 00 00 01) in place of its
    length where ``annex_b`` (the avcC record kept; a set: those packets' alone, decode order); ``tail``, NAL units
    (each unit's header first, length-prefixed or start-code framed as the rest), a sample of its own after the last
    (one frame's duration later)."""
    with av.open(str(src)) as i, av.open(str(dst), "w") as o:
        stream = i.streams.video[0]
        out = o.add_stream_from_template(stream)
        packets = [p for p in i.demux(stream) if p.size]
        step = packets[1].pts - packets[0].pts if packets[1].pts > packets[0].pts else packets[0].duration
        last = max(packets, key=lambda p: p.pts)
        made = [(_units(bytes(p)), p.pts, p.dts, p.is_keyframe, p.time_base) for p in packets]
        if tail:
            made.append(([tail], last.pts + abs(step), max(p.dts for p in packets) + abs(step), False, last.time_base))
        for k, (units, pts, dts, key, base) in enumerate(made):
            framed = k in annex_b if isinstance(annex_b, set) else annex_b
            data = b"".join(b"\x00\x00\x00\x01" + u for u in units) if framed else _joined(units)
            q = av.Packet(data)
            q.pts, q.dts, q.time_base, q.is_keyframe = pts, dts, base, key
            q.stream = out
            o.mux(q)
    return dst
