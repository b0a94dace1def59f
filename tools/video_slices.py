"""Decoder threading for a video stream (slice threads or frame threads), and the H.264 / HEVC NAL unit reading the scan
needs: slices per frame, leading pictures, packets of no picture (and how the reads feed those: `fed_with_pictures`)
(part of ``tools.video``; H.264 field pairs: ``tools.h264_field_pairs``).

FFmpeg decodes a frame's slices in parallel with slice threads (PyAV's default) and several frames at
once with frame threads ("AUTO" here: frame threads where the codec has them). Which one pays depends
on how the clip was encoded, and for H.264 on what the damage check needs:

- H.264 never decodes with slice threads: they hide damage. FFmpeg's H.264 decoder conceals and flags a broken
  slice (``frame.is_corrupt``, which ``tools.video_damage`` builds on) only for the slices its first slice context
  decodes; with slice threads a multi-slice frame (PyAV's own writes, ``tools.video.write_video``: one slice per
  encoder thread) came out concealed and unflagged (FFmpeg 8, 2 or more threads), and the frames that reference
  it were handed out damaged, no error. So H.264 keeps frame threads from 640x360 up, whatever its slices, and
  decodes on one thread below (where slice threads sped up only multi-slice clips). Frame threads parse each
  frame's slices on one thread, flags kept. Cost, ``benchmarks/video_slice_threads.py`` (``VideoReader.read`` of
  2-slice ``write_video`` clips, medians of 15-21 interleaved runs, 3 runs on a 2-core VM at load 5-9, so CPU
  time is the measure; wall time swung 2x between runs): 256x256 x 33, every frame, 11.2-12.2 ms CPU with slice
  threads vs 9.9-10.1 on one thread (8 frames: 7.9-9.7 vs 7.1-7.3); 480x832 x 81, every frame, 93-110 ms with
  slice threads vs 97-117 with frame threads (+4-9%; one thread 89-103), 8 frames 53-65 vs 59-74 (+10-14%; one
  thread 51-64). Frame threads should shorten a lone read's wall time on more cores (not measured here). Measured
  again (2 runs of 21 interleaved repeats, load 12-13 on the 2 cores): 480x832 8 frames 79-89 ms CPU with frame threads
  vs 68-73 on one thread (+16-23%), every frame 158-165 vs 132-142, but the 8 frames' wall 208-335 vs 410-532 ms: one
  thread is cheaper in CPU, frame threads faster on a loaded host, so the rule stays (no host with more cores here).
- HEVC written by PyAV carries one slice per encoder thread too: slice threads decode it in parallel, and
  frame threads made it slower (H.264 on a 2-core VM, whole-clip decode, wall / CPU: 720p x 93 frames 97 / 129
  ms with frame threads vs 63-77 / 107-116 ms with slice threads; 480p x 81 49 / 66 vs 26-30 / 43-47 ms).
  FFmpeg's HEVC decoder flags no concealed picture on any threads: its damage is not seen either way.
- A single-slice clip gets nothing from slice threads; frame threads saved ~4% wall for ~30% more CPU
  on 2 cores and save more on hosts with more cores, so such clips keep frame threads from 640x360 up.
- Other codecs keep frame threads from 640x360 up (MPEG-4 part 2 720p: 22 vs 38 ms wall, same CPU).
- Below 640x360 frame threads cost ~3x the CPU per frame: every clip keeps slice threads (H.264: one thread).

The scan (``tools.video_scan.scan``) counts the slices of the first keyframe packet (``slices_per_frame``:
the VCL NAL units of an H.264 / HEVC access unit, length-prefixed as in MP4 / MKV or with Annex B start
codes as in MPEG-TS); the reads pass that count to ``video_stream``. When it is unknown (not parsed, or
not H.264 / HEVC), the codec rule above applies with one slice assumed for H.264 / HEVC.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import av

THREADED_DECODE_PIXELS = 640 * 360
"""Frames smaller than this decode with slice threads only (FFmpeg's frame threads cost ~3x the CPU)."""
SLICE_THREADED_CODECS = frozenset({"h264", "hevc"})
"""Decoders whose frames' slices the scan counts (``slices_per_frame``)."""
SLICE_THREADS_HIDE_DAMAGE = frozenset({"h264"})
"""Decoders that neither flag nor fail a frame whose damaged slice a slice thread decoded (module docstring): never
slice-threaded."""


def _nal_units(data: bytes, length_size: int | None) -> list[bytes]:
    """The NAL units of one packet: length-prefixed (`length_size` bytes each) or, when None, split at
    Annex B start codes (00 00 01, with or without a leading zero byte)."""
    units = []
    if length_size is not None:
        i = 0
        while i + length_size <= len(data):
            n = int.from_bytes(data[i:i + length_size], "big")
            i += length_size
            if i + n > len(data):
                return []  # a length past the end: not this format
            if n == 0:
                break
            units.append(data[i:i + n])
            i += n
        return units
    starts, i = [], data.find(b"\x00\x00\x01")
    while i >= 0:
        starts.append(i + 3)
        i = data.find(b"\x00\x00\x01", i + 3)
    ends = [start - 3 for start in starts[1:]] + [len(data)] if starts else []  # each up to the next start code
    return [data[s:e].rstrip(b"\x00") for s, e in zip(starts, ends, strict=True)]


def nal_length_size(codec: str, extradata: bytes | None) -> int | None:
    """The size of the NAL unit lengths that prefix the H.264 / HEVC packets of a stream with `extradata`, as FFmpeg's
    decoders tell it: an avcC record (its first byte 1) or an hvcC one (23 bytes or more, its first byte 1, or 0 as in
    the records written before the standard's, where its next bytes are no Annex B start code); None: Annex B."""
    extra = extradata or b""
    if codec == "h264":
        return (extra[4] & 3) + 1 if extra[:1] == b"\x01" and len(extra) > 4 else None
    if len(extra) >= 23 and (extra[0] == 1 or extra[0] == 0 and (extra[1] or extra[2] > 1)):
        return (extra[21] & 3) + 1
    return None


def record_units(record: bytes, at: int, count: int, units: list[bytes]) -> int | None:
    """Add to `units` the `count` NAL units of the avcC / hvcC `record` from byte `at` on (each after its 16-bit
    length); the byte after them, or None where one runs past the record's end (those before it added)."""
    for _ in range(count):
        n = int.from_bytes(record[at:at + 2], "big")
        if at + 2 + n > len(record):
            return None
        units.append(record[at + 2:at + 2 + n])
        at += 2 + n
    return at


def nal_units(data: bytes, codec: str, extradata: bytes | None) -> list[bytes]:
    """The non-empty NAL units of `data`, length-prefixed as the avcC / hvcC record `extradata` says or Annex B."""
    return [u for u in _nal_units(data, nal_length_size(codec, extradata)) if u]


def vcl_nal_types(data: bytes, codec: str, extradata: bytes | None) -> list[int] | None:
    """The NAL unit types of the slices (VCL NAL units) of one H.264 / HEVC access unit `data`, in order; None for
    another codec or a packet that does not parse. `extradata` (the stream's avcC / hvcC record, or nothing for
    Annex B streams) gives the NAL length size."""
    if codec not in SLICE_THREADED_CODECS or not data:
        return None
    units = nal_units(data, codec, extradata)
    if codec == "h264":
        return [t for t in (u[0] & 0x1F for u in units) if 1 <= t <= 5]
    return [t for t in ((u[0] >> 1) & 0x3F for u in units) if t < 32]


def slices_per_frame(data: bytes, codec: str, extradata: bytes | None) -> int | None:
    """How many slices (VCL NAL units) one H.264 / HEVC access unit `data` holds; None for another
    codec or a packet that does not parse (`vcl_nal_types`)."""
    return len(vcl_nal_types(data, codec, extradata) or ()) or None


HEAD_BYTES = 4096
"""Bytes of an Annex B packet searched first for a unit that codes a picture (it follows the delimiter, parameter sets
and SEI, a few hundred bytes); the whole packet only where the head holds none."""

NON_PICTURE_UNITS = {"h264": frozenset({6, 7, 8, 9, 10, 11, 12, 13, 15}), "hevc": frozenset(range(32, 41))}
"""NAL unit types that code no picture (H.264: SEI, parameter sets, access unit delimiter, end of sequence / stream,
filler; HEVC: VPS, SPS, PPS, delimiter, end of sequence / bitstream, filler, SEI). Not unspecified or reserved types,
which a corrupt NAL header gives as well."""


def codes_no_picture(data: bytes | memoryview | av.Packet, codec: str, extradata: bytes | None) -> bool:
    """Whether the H.264 / HEVC packet `data` holds NAL units and every one of them of a type that codes no picture
    (`NON_PICTURE_UNITS`): a raw stream's trailing access unit delimiter, which FFmpeg's parser gives a packet of its
    own, or such an MP4 sample. The decoder gives no frame for it. False for another codec and for a packet that does
    not parse (a NAL length past its end, bytes left over, no start code). The units' headers alone are read, up to
    the first that codes a picture (the scan asks this of every packet)."""
    known = NON_PICTURE_UNITS.get(codec)
    if known is None or not data:
        return False
    view, size = memoryview(data), nal_length_size(codec, extradata)
    shift = 1 if codec == "hevc" else 0
    mask = 0x3F if codec == "hevc" else 0x1F
    if size is not None:  # avcC / hvcC: length-prefixed
        i = 0
        while i < len(view):
            n = int.from_bytes(view[i:i + size], "big")
            i += size
            if n == 0 or i + n > len(view) or (view[i] >> shift) & mask not in known:
                return False
            i += n
        return True
    raw = bytes(view[:HEAD_BYTES])
    while True:
        i = raw.find(b"\x00\x00\x01")  # (a unit's data holds no start code: emulation prevention)
        if i < 0:
            return False
        while 0 <= i and i + 3 < len(raw):
            if (raw[i + 3] >> shift) & mask not in known:
                return False
            i = raw.find(b"\x00\x00\x01", i + 3)
        if len(raw) == len(view):
            return i < 0  # (not a start code that ends the packet)
        raw = bytes(view)  # the head held no picture: the whole packet decides


def fed_with_pictures(packets: Iterable[av.Packet], codec: str,
                      extradata: bytes | None) -> Iterator[tuple[av.Packet, int, bool]]:
    """`packets` (decode order) as the decoder is fed them: a packet of no picture (`codes_no_picture`) not alone but
    at the head of the next packet with data (FFmpeg's parser joins a raw stream's units so): FFmpeg's H.264 decoder
    fails a packet without a slice ("no frame!"), which a read takes for corrupt data, and with frame threads tells
    it packets later; the parameter sets it may hold are decoded all the same. One that the stream ends on is fed
    nothing. Each packet with the count of the packets of no picture, not discarded, whose tags its frame brings out
    (they keep their tags: the scan counts them, ``FrameIndex.fields``): those it carries, and those a discarded packet
    before it carried, whose frame is dropped (counted on such a packet, their tags never came out, and the damage
    check kept each read decoding on: a read of frame 0 decoded the whole clip), and whether it is one the demuxer
    marked discard (an edit list's cut): a packet made here cannot take the flag, and the reader drops its frame as
    FFmpeg drops a discarded packet's (``tools.video_tags.DISCARDED``)."""
    held: list[av.Packet] = []
    owed = 0  # those a discarded packet carried, for the next packet not discarded (or the end)
    for packet in packets:
        if packet.size and codes_no_picture(packet, codec, extradata):
            held.append(packet)
            continue
        carried, discard = owed + sum(not p.is_discard for p in held), packet.is_discard and packet.size > 0
        if held and packet.size:
            packet = joined(b"".join(bytes(p) for p in held), packet)
        owed = carried if discard else 0
        yield packet, 0 if discard else carried, discard
        held = []


def joined(head: bytes, packet: av.Packet) -> av.Packet:
    """`packet` with `head` before its data, a new packet: not marked discard (an edit list's cut), which it cannot
    take, and whose frame FFmpeg then gives."""
    joined = av.Packet(head + bytes(packet))
    joined.pts, joined.dts, joined.duration, joined.time_base = packet.pts, packet.dts, packet.duration, \
        packet.time_base
    joined.is_keyframe, joined.is_corrupt = packet.is_keyframe, packet.is_corrupt
    for side in packet.iter_sidedata():
        side.to_packet(joined)
    return joined


HEVC_LEADING = range(6, 10)
"""HEVC's RADL_N, RADL_R, RASL_N and RASL_R NAL unit types: leading pictures, decoded after their keyframe (IRAP)
and shown before it. A stream that starts on a CRA keyframe (x265's open GOPs, cut there) has RASL pictures whose
references came before the cut: FFmpeg's decoder drops them, as the standard says."""

HEVC_RADL = range(6, 8)
"""RADL_N and RADL_R: the leading pictures that reference only their keyframe and each other (x265 ``radl`` before an
IDR), which a decode from that keyframe gives whole; the standard shows them after any RASL ones."""


def frame_threads(codec: str, width: int, height: int, slices: int | None) -> bool:
    """Whether a stream of `codec` at `width` x `height` whose frames hold `slices` slices (None:
    unknown) decodes with frame threads ("AUTO") rather than slice threads (module docstring)."""
    if width * height < THREADED_DECODE_PIXELS:
        return False
    return codec != "hevc" or (slices or 1) <= 1


def slice_thread_count(codec: str) -> int:
    """The thread count for a stream of ``codec`` that does not decode with frame threads: one where slice threads
    hide damage (``SLICE_THREADS_HIDE_DAMAGE``), else 0 (FFmpeg's automatic count)."""
    return 1 if codec in SLICE_THREADS_HIDE_DAMAGE else 0


class Bits:
    """An H.264 / HEVC RBSP read bit by bit (emulation prevention bytes removed); IndexError past its end."""

    def __init__(self, unit: bytes, header: int = 1) -> None:
        rbsp = unit[header:].replace(b"\x00\x00\x03", b"\x00\x00")  # (after the NAL header: 1 byte, HEVC's 2)
        self._value, self._left = int.from_bytes(rbsp, "big"), 8 * len(rbsp)

    def u(self, n: int) -> int:
        if n > self._left:
            raise IndexError("past the end of the NAL unit")
        self._left -= n
        return (self._value >> self._left) & ((1 << n) - 1)

    def ue(self) -> int:  # Exp-Golomb
        zeros = 0
        while not self.u(1):
            zeros += 1
            if zeros > 31:
                raise IndexError("not Exp-Golomb")
        return (1 << zeros) - 1 + self.u(zeros)

    def se(self) -> int:
        v = self.ue()
        return (v + 1) // 2 if v % 2 else -(v // 2)
