"""Decoder threading for a video stream: slice threads or frame threads (part of ``tools.video``).

FFmpeg decodes a frame's slices in parallel with slice threads (PyAV's default) and several frames at
once with frame threads ("AUTO" here: frame threads where the codec has them). Which one pays depends
on how the clip was encoded:

- H.264 and HEVC written by PyAV (``tools.video.write_video``, which writes the trainer's rollouts) carry
  one slice per encoder thread: slice threads decode them in parallel, and frame threads made them
  slower. 2-core VM, whole-clip decode, wall / CPU: 720p x 93 frames 97 / 129 ms with frame threads vs
  63-77 / 107-116 ms with slice threads; 480p x 81 49 / 66 vs 26-30 / 43-47 ms.
- A single-slice H.264 clip (most encoders' default) gets nothing from slice threads; frame threads
  saved ~4% wall for ~30% more CPU on 2 cores and save more on hosts with more cores, so such clips keep
  frame threads from 640x360 up, as every clip of that size did before slices were counted.
- Other codecs keep frame threads from 640x360 up (MPEG-4 part 2 720p: 22 vs 38 ms wall, same CPU).
- Below 640x360 frame threads cost ~3x the CPU per frame: every clip keeps slice threads.

The scan (``tools.video_scan.scan``) counts the slices of the first keyframe packet (``slices_per_frame``:
the VCL NAL units of an H.264 / HEVC access unit, length-prefixed as in MP4 / MKV or with Annex B start
codes as in MPEG-TS); the reads pass that count to ``video_stream``. When it is unknown (not parsed, or
not H.264 / HEVC), the codec rule above applies with one slice assumed for H.264 / HEVC.
"""

from __future__ import annotations

THREADED_DECODE_PIXELS = 640 * 360
"""Frames smaller than this decode with slice threads only (FFmpeg's frame threads cost ~3x the CPU)."""
SLICE_THREADED_CODECS = frozenset({"h264", "hevc"})
"""Decoders whose multi-slice frames keep slice threads at every size."""


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
    ends = [start - 3 for start in starts[1:]] + [len(data)]  # each unit runs up to the next start code
    return [data[s:e].rstrip(b"\x00") for s, e in zip(starts, ends, strict=True)]


def vcl_nal_types(data: bytes, codec: str, extradata: bytes | None) -> list[int] | None:
    """The NAL unit types of the slices (VCL NAL units) of one H.264 / HEVC access unit `data`, in order; None for
    another codec or a packet that does not parse. `extradata` (the stream's avcC / hvcC record, or nothing for
    Annex B streams) gives the NAL length size."""
    if codec not in SLICE_THREADED_CODECS or not data:
        return None
    extra = extradata or b""
    length_size = None
    if extra[:1] == b"\x01":  # avcC / hvcC: length-prefixed NAL units
        at = 4 if codec == "h264" else 21
        if len(extra) <= at:
            return None
        length_size = (extra[at] & 3) + 1
    units = [u for u in _nal_units(data, length_size) if u]
    if codec == "h264":
        return [t for t in (u[0] & 0x1F for u in units) if 1 <= t <= 5]
    return [t for t in ((u[0] >> 1) & 0x3F for u in units) if t < 32]


def slices_per_frame(data: bytes, codec: str, extradata: bytes | None) -> int | None:
    """How many slices (VCL NAL units) one H.264 / HEVC access unit `data` holds; None for another
    codec or a packet that does not parse (`vcl_nal_types`)."""
    return len(vcl_nal_types(data, codec, extradata) or ()) or None


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
    return codec not in SLICE_THREADED_CODECS or (slices or 1) <= 1
