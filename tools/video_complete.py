"""Whether the demux pass read the whole file: the checks of ``tools.video_scan.scan`` that tell a truncated
file from a complete one (the container's declared frame count, a packet FFmpeg read short, and per container the
tail a cut leaves: MPEG-TS, MPEG-PS, fragmented MP4 and its ``sidx`` index). Each raises ``VideoDecodeError`` naming
what is missing; a complete file passes silently."""

from __future__ import annotations

from pathlib import Path

import av

from tools.mp4_boxes import cut_fragment, index_past_end
from tools.mpegps_tail import ends_inside_element
from tools.mpegts_tail import ends_inside_packet
from tools.video_edits import kept_frames
from tools.video_errors import VideoDecodeError


def declared_count(samples: int) -> str:
    """How the errors name the container's declared count: its samples (MP4) or chunks (AVI) hold frames, or each a
    field (a stream copy of field-coded broadcast H.264, two to a frame)."""
    return f"{samples} samples (frames, or fields of interlaced video)"


def check_complete(container: av.container.InputContainer, stream: av.video.stream.VideoStream, name: str,
                   src: str | Path | bytes | None, packets: int, cut: bool, last_dts: int | None,
                   step: int | None) -> None:
    """``VideoDecodeError`` when the file ends before its video does. ``packets``: the video packets the demuxer
    gave; ``cut``: the last one was flagged read short; ``last_dts`` / ``step``: the largest decode timestamp and the
    shortest step between two (None without them); ``src`` (the path or bytes; None: the tail checks are skipped)."""
    formats = container.format.name.split(",")
    declared = int(stream.frames or 0)
    # AVI counts its empty drop-frame chunks (timestamp gaps, and the last frame's duration in a time base finer
    # than the rate) in the declared frames; its demuxer returns none of them, but its timestamps count chunks:
    # the file is complete when its last frame reaches the count (its chunks: the shortest step, or 1)
    avi_complete = "avi" in formats and last_dts is not None and last_dts + (step or 1) >= declared
    if declared > packets and not avi_complete:
        # MP4 / MOV declare every sample, also those a trimming edit list cuts (FFmpeg drops them)
        kept = kept_frames(src, stream.id) if src is not None and "mov" in formats else None
        if kept is not None and kept < declared:
            if kept > packets:
                raise VideoDecodeError(
                    f"{name}: truncated file: its edit list keeps {kept} of the {declared} samples the "
                    f"container declares, but only {packets} could be read")
        else:
            raise VideoDecodeError(
                f"{name}: truncated file: the container declares {declared_count(declared)} but only "
                f"{packets} could be read")
    if cut:  # its last frame's data was cut short (a fragmented MP4, FLV or AVI: no count, or its index cut off)
        raise VideoDecodeError(f"{name}: truncated file: the data of its last video packet (of {packets}) is "
                               "cut short")
    if "mpegts" in formats and src is not None and ends_inside_packet(src, stream.id):  # its last PES flagged nothing
        # (stream.id: the video's PID; a cut packet of another PID cut none of the video)
        raise VideoDecodeError(f"{name}: truncated file: it ends inside an MPEG-TS packet (the data of its last "
                               f"video frame, of {packets}, is cut short)")
    if "mpeg" in formats and src is not None and ends_inside_element(src):  # MPEG-PS: nor its last pack
        raise VideoDecodeError(f"{name}: truncated file: it ends inside an MPEG-PS pack or packet (the data of its "
                               f"last frames, of {packets} read, is cut short)")
    fragment = cut_fragment(src) if src is not None and "mov" in formats else None
    if fragment is not None:
        kind, offset, size, total = fragment
        where = (f"its last fragment's 'moof' box (at byte {offset}) has no 'mdat' box after it" if kind == b"moof"
                 and offset + size <= total else f"it ends {total - offset} bytes into the header of a box at byte "
                 f"{offset}" if not kind else f"its {kind.decode()!r} box at byte {offset} declares {size} bytes, "
                 f"but the file ends {offset + size - total} bytes short of them")
        raise VideoDecodeError(f"{name}: truncated file: {where} (frames after the {packets} read are missing)")
    index_cut = index_past_end(src) if src is not None and "mov" in formats else None
    if index_cut is not None:
        offset, end, total = index_cut
        raise VideoDecodeError(f"{name}: truncated file: its 'sidx' box (at byte {offset}) indexes fragments up to "
                               f"byte {end}, but the file ends {end - total} bytes short of them (frames after the "
                               f"{packets} read are missing)")
