"""Zero bytes inside an H.264 / HEVC NAL unit: damage the decoder does not see (``broken_nal_unit``).

A stretch of a picture's bytes zeroed (a disk block lost, a download's gap filled with zeros) decodes as valid
macroblocks: CABAC reads zeros as symbols like any others, the slice ends where its macroblocks do, and FFmpeg's H.264
decoder neither conceals nor flags nor fails the picture (none of ``err_detect``'s checks, ``explode`` and
``aggressive`` included, on one thread or on frame threads; a 96x96 x264 clip with B-frames: 16 of its 40 packets,
a fifth of each zeroed, gave wrong frames with no signal), and the frames up to the next keyframe reference it. Yet
the zeros break the stream's own byte rule: within a NAL unit no three bytes may read 00 00 00, 00 00 01 or 00 00 02
(H.264 7.4.1, HEVC 7.4.2.3: the encoder escapes them as 00 00 03 0x), and FFmpeg copies such bytes through as data.
Zero bytes after a unit's last byte are padding (Annex B's trailing_zero_8bits, or a muxer's), not inside it.

Only damage that leaves such a run: a bit flipped in CABAC data, or bytes replaced by other non-zero bytes, still
decodes unseen (no checksum in H.264; HEVC's optional picture hashes: ``tools.video_threads.HASH_CHECKED``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain

import av

from tools.hevc_headers import SUB_LAYER_NON_REFERENCE
from tools.video_errors import VideoDecodeError
from tools.video_slices import SLICE_THREADED_CODECS, nal_length_size, nal_units

FORBIDDEN = (b"\x00\x00\x00", b"\x00\x00\x01", b"\x00\x00\x02")
"""The three-byte sequences no H.264 / HEVC NAL unit holds (emulation prevention)."""

CHECKED_UNITS = {"h264": frozenset({1, 2, 3, 4, 5, 7, 8}),
                 "hevc": frozenset({*range(10), *range(16, 22), 32, 33, 34})}
"""The NAL unit types checked: those the decoder makes pictures of (slices, parameter sets). Not SEI, filler or
unspecified units, which some writers fill without emulation prevention (ONVIF Media Signing's SEI may hold a raw
00 00 00 01) and the decoder skips: a clean clip's frames."""


def broken_nal_unit(data: bytes, codec: str, extradata: bytes | None) -> bool:
    """Whether a NAL unit of the H.264 / HEVC packet ``data`` (length-prefixed as the stream's avcC / hvcC record
    ``extradata`` says, else Annex B) holds a sequence of ``FORBIDDEN`` before its last non-zero byte; False for another
    codec. (A length past the packet's end ends the look: FFmpeg fails such a packet itself.) Only the units the
    decoder makes pictures of are checked (``CHECKED_UNITS``)."""
    return bool(broken_headers(data, codec, extradata))


def broken_headers(data: bytes, codec: str, extradata: bytes | None, *, annex_b: bool = False) -> list[int]:
    """The header bytes (the first byte) of the NAL units of ``data`` (of ``CHECKED_UNITS``' types) that
    ``broken_nal_unit`` finds broken: none for a clean packet, whose every unit is scanned either way. ``annex_b``: the
    packet is framed by start codes though ``extradata`` gives lengths (``start_code_framed``)."""
    if codec not in SLICE_THREADED_CODECS:
        return []
    checked = CHECKED_UNITS[codec]
    shift, mask = (1, 0x3F) if codec == "hevc" else (0, 0x1F)
    size = None if annex_b else nal_length_size(codec, extradata)
    if size is None:  # (Annex B: each unit split off at its start code, trailing zeros stripped)
        return [unit[0] for unit in nal_units(data, codec, None)
                if (unit[0] >> shift) & mask in checked and _forbidden(unit, 0, len(unit))]
    at, found = 0, list[int]()
    while at + size <= len(data):
        length = int.from_bytes(data[at:at + size], "big")
        at += size
        if not length or at + length > len(data):
            break
        end = at + length
        while end > at and not data[end - 1]:
            end -= 1
        if (data[at] >> shift) & mask in checked and _forbidden(data, at, end):
            found.append(data[at])
        at += length
    return found


def start_code_framed(data: bytes, codec: str, extradata: bytes | None, before: bool) -> bool:
    """Whether FFmpeg's H.264 decoder takes the packet ``data`` of a stream whose avcC record ``extradata`` gives 4-byte
    lengths as Annex B (start codes), as some muxers write them: where it opens with 00 00 00 01 and the 4 bytes after
    the unit header read past its end; as length-prefixed where its first length is above 1 and within it; else as it
    took the packet before (``before``; the decoder keeps its choice, a new one starts length-prefixed). Not HEVC's
    decoder, nor with other lengths: always as the record says."""
    if codec != "h264" or nal_length_size(codec, extradata) != 4:
        return False
    return _framed(data[:9], len(data), before)


def _framed(head: bytes, size: int, before: bool) -> bool:
    """``start_code_framed`` of a packet of ``size`` bytes that opens with ``head`` (its first 9)."""
    first = int.from_bytes(head[:4], "big")
    if size > 8 and first == 1 and int.from_bytes(head[5:9], "big") > size:
        return True
    return False if size > 3 and 1 < first <= size else before


def start_code_file(packets: Iterable[av.Packet], codec: str, extradata: bytes | None,
                    name: str = "") -> tuple[Iterator[av.Packet], bool]:
    """``packets`` (a file's, decode order from its start) as they come, and whether its H.264 samples are framed by
    start codes behind its avcC record: decided once for the file by its first packet with data (``start_code_framed``,
    as a decoder new to the stream takes it), and every reader of the file's packets (the scan, the reads' feed and
    checks) frames them so (``framing``): the scan read such samples as length-prefixed (an access unit delimiter's
    sample counted as a frame), and the reads' feed decided anew at each call. A later packet the decoder takes framed
    the other way fails the file (a ``VideoDecodeError`` naming ``name``): split as the first, a length-prefixed sample
    of 256-511 bytes opened with a start code (00 00 01) and read as a unit of no picture, and every frame after it
    came back as the next one's."""
    it = iter(packets)
    head = []
    for packet in it:
        head.append(packet)
        if packet.size:
            annex_b = start_code_framed(bytes(packet), codec, extradata, False)
            checked = codec == "h264" and nal_length_size(codec, extradata) == 4
            return chain(head, _one_framing(it, annex_b, name, len(head)) if checked else it), annex_b
    return iter(head), False


def _one_framing(packets: Iterator[av.Packet], annex_b: bool, name: str, at: int) -> Iterator[av.Packet]:
    """``packets`` (the file's from its ``at``-th), each taken by the decoder framed as ``annex_b`` says, or an error."""
    for k, packet in enumerate(packets, at):
        if packet.size and _framed(bytes(memoryview(packet)[:9]), packet.size, annex_b) != annex_b:
            ways = ("by start codes (Annex B)", "by lengths (as its avcC record says)")
            raise VideoDecodeError(f"{name}: unsupported H.264 framing: its packet {k} (decode order, from 0) is framed "
                                   f"{ways[annex_b]}, its first {ways[not annex_b]}: the file's samples change framing "
                                   "(files joined?), which the reader's checks of the packets do not follow")
        yield packet


def framing(extradata: bytes | None, annex_b: bool) -> bytes | None:
    """The record the packets' NAL units are split by (``tools.video_slices.nal_units``): none (start codes) for a
    file of Annex B samples behind its avcC record (``start_code_file``)."""
    return None if annex_b else extradata


UNREFERENCED_NOTE = {
    "h264": " (its slices say no frame references it, nal_ref_idc 0: the frames decoded after it up to the next "
            "keyframe fail too unless the frame_nums of the reference pictures around it bear that out)",
    "hevc": " (its slices say no frame references it, sub-layer non-reference pictures of the highest sub-layer: the "
            "frames decoded after it up to the next keyframe fail too unless the next picture's reference picture set "
            "bears that out)"}
"""What a damaged picture whose slices say no picture references it is told with, by codec (``unreferenced``)."""


def unreferenced(headers: list[int], codec: str) -> bool:
    """Whether the NAL units of ``headers`` (``broken_headers``) are all slices of a picture that says no other
    references it: its damage is its own frame's alone where the stream bears that out (``tools.video_nonref``,
    ``tools.hevc_nonref``). H.264: nal_ref_idc 0 (x264's B-frames but the pyramid's); HEVC: a sub-layer non-reference
    type (the TemporalId, in the header's second byte, is the references' to check)."""
    if codec == "hevc":
        return bool(headers) and all((h >> 1) & 0x3F in SUB_LAYER_NON_REFERENCE for h in headers)
    return codec == "h264" and bool(headers) and all(1 <= h & 0x1F <= 5 and not h & 0x60 for h in headers)


def _forbidden(data: bytes, start: int, end: int) -> bool:
    """Whether ``data[start:end]`` holds a sequence of ``FORBIDDEN`` (one scan for 00 00, rare in valid data: the
    encoder's escapes)."""
    at = data.find(b"\x00\x00", start, end)
    while 0 <= at < end - 2:
        if data[at + 2] <= 2:
            return True
        at = data.find(b"\x00\x00", at + 1, end)
    return False


def zero_run_damage(tag: int, alone: bool = False, codec: str = "h264") -> str:
    """What the watch names for the packet tagged ``tag`` that ``broken_nal_unit`` found broken (``alone``: a picture
    of ``codec`` that says no other references it, ``unreferenced``)."""
    return (f"in packet {tag} of the decode (decode order), a run of zero bytes inside a picture's data, which no "
            "encoder writes (the decoder takes it as data, no error)" + (
                UNREFERENCED_NOTE[codec] if alone else
                ": the frames decoded after it up to the next keyframe may reference its frame"))
